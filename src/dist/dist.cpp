#include "composer/dist/dist.h"

#include "composer/utils/error_text.h"

#include "composer/utils/compat.h"
#include "dist/detail/comm_backend.h"

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#if COMPOSER_HAS_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if COMPOSER_HAS_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

namespace composer::dist {
namespace {

struct World {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<detail::CommBackend> backend;
  std::string listen_address;     // where this rank's CPU backend listens (Gloo), for messages and tests
  c10::Device device{c10::kCPU};  // the backend's device: CUDA for NCCL
  std::chrono::milliseconds timeout{300000};
  std::map<std::string, int64_t> subgroups_made;  // how often each rank list was made into a group
};

World& world() {
  static World g;
  return g;
}

}  // namespace

struct Group::Impl {
  c10::intrusive_ptr<detail::CommBackend> backend;  // none for a group of one rank
  std::vector<int64_t> ranks;
  int64_t rank = 0;
};

namespace {

detail::CommBackend& pg() {
  if (!world().backend) {
    throw std::logic_error("dist: WORLD_SIZE=" + std::to_string(get_world_size()) +
                           " but the process group is not initialised; call composer::dist::initialize_dist (the "
                           "Trainer does) or start with composer-cpp launch");
  }
  return *world().backend;
}

// The backend `g`'s collectives run on: the world's, or the subgroup's.
detail::CommBackend& pg(const Group& g) {
  if (!g.impl()) return pg();
  if (!g.impl()->backend) throw std::logic_error("dist: a collective on a group of one rank");
  return *g.impl()->backend;
}

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
      return c10d::ReduceOp::SUM;
    case ReduceOp::MAX:
      return c10d::ReduceOp::MAX;
    case ReduceOp::MIN:
      return c10d::ReduceOp::MIN;
    case ReduceOp::PRODUCT:
      return c10d::ReduceOp::PRODUCT;
  }
  return c10d::ReduceOp::SUM;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

void run(const c10::intrusive_ptr<c10d::Work>& work, const char* what) {
  try {
    work->wait();
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("dist: ") + what + " failed on rank " + std::to_string(get_global_rank()) +
                             " (a peer died or timed out?): " + brief_error(e));
  }
}

void create_backend(const c10::Device& device, int64_t rank, int64_t world_size, std::chrono::milliseconds timeout);

bool uses_agent_store() { return env_or("TORCHELASTIC_USE_AGENT_STORE", "") == "True"; }

// Keys of one attempt: torchrun restarts reuse its store, so each restart gets a fresh namespace.
std::string store_prefix() { return "composer/attempt_" + env_or("TORCHELASTIC_RESTART_COUNT", "0"); }

}  // namespace

void initialize_dist(const c10::Device& device, std::chrono::milliseconds timeout) {
  if (is_initialized() || get_world_size() == 1) return;
  const int64_t rank = get_global_rank(), world_size = get_world_size();
  if (rank >= world_size) {
    throw std::invalid_argument("dist: RANK=" + std::to_string(rank) +
                                " is not below WORLD_SIZE=" + std::to_string(world_size));
  }
  const std::string addr = env_or("MASTER_ADDR", "127.0.0.1");
  const std::string port_text = env_or("MASTER_PORT", "29500");
  const int port = std::atoi(port_text.c_str());
  if (port <= 0 || port > 65535)
    throw std::invalid_argument("dist: MASTER_PORT='" + port_text + "' is not a port number");
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(port);
  // Under torchrun the elastic agent already serves the store at MASTER_ADDR:MASTER_PORT; every rank is a client.
  so.isServer = rank == 0 && !uses_agent_store();
  so.numWorkers = static_cast<int>(world_size);
  so.timeout = timeout;
  try {
    world().store = c10::make_intrusive<c10d::TCPStore>(addr, so);
  } catch (const std::exception& e) {
    throw std::runtime_error("dist: rank " + std::to_string(rank) + " could not reach the rendezvous at " + addr + ":" +
                             port_text + " within " + std::to_string(timeout.count()) +
                             " ms (WORLD_SIZE=" + std::to_string(world_size) + "): " + brief_error(e));
  }
  try {
    create_backend(device, rank, world_size, timeout);
  } catch (const std::exception& e) {
    world().store.reset();
    throw std::runtime_error("dist: rank " + std::to_string(rank) + " timed out after " +
                             std::to_string(timeout.count()) + " ms waiting for the other ranks to join at " + addr +
                             ":" + port_text + " (WORLD_SIZE=" + std::to_string(world_size) +
                             "; are all ranks started?): " + brief_error(e));
  }
}

namespace {

bool is_loopback(const std::string& addr) { return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1"; }

#if COMPOSER_HAS_GLOO
// The address Gloo listens on, as PyTorch chooses it: GLOO_SOCKET_IFNAME's first interface, else this node's
// address (COMPOSER_NODE_ADDR, which `composer-cpp launch --node-addr` sets, or the host name's address), except
// that a single-machine run (MASTER_ADDR on loopback) stays on 127.0.0.1.
std::shared_ptr<::gloo::transport::Device> gloo_device() {
  const std::string ifname = env_or("GLOO_SOCKET_IFNAME", "");
  if (!ifname.empty()) {
    const std::string first = ifname.substr(0, ifname.find(','));
    world().listen_address = "interface " + first;
    return c10d::ProcessGroupGloo::createDeviceForInterface(first);
  }
  const std::string node = env_or("COMPOSER_NODE_ADDR", "");
  if (!node.empty()) {
    world().listen_address = node;
    return c10d::ProcessGroupGloo::createDeviceForHostname(node);
  }
  if (is_loopback(env_or("MASTER_ADDR", "127.0.0.1"))) {
    world().listen_address = "127.0.0.1";
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  world().listen_address = "the host name's address";
  return c10d::ProcessGroupGloo::createDefaultDevice();
}
#endif

// A backend for `size` processes meeting under `prefix` in the store: NCCL on a CUDA device, Gloo otherwise.
c10::intrusive_ptr<detail::CommBackend> make_backend(const c10::Device& device, const std::string& prefix, int64_t rank,
                                                     int64_t size, std::chrono::milliseconds timeout) {
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>(prefix, world().store);
  if (device.is_cuda()) {
#if COMPOSER_HAS_NCCL
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, static_cast<int>(rank), static_cast<int>(size), opts);
#else
    throw std::invalid_argument("dist: this LibTorch build has no NCCL backend for CUDA devices");
#endif
  }
#if COMPOSER_HAS_GLOO
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
  opts->devices.push_back(gloo_device());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, static_cast<int>(rank), static_cast<int>(size), opts);
#else
  throw std::invalid_argument("dist: this build has no Gloo backend for CPU devices (install libgloo-dev and rebuild)");
#endif
}

void create_backend(const c10::Device& device, int64_t rank, int64_t world_size, std::chrono::milliseconds timeout) {
  world().device = device.is_cuda() ? device : c10::Device(c10::kCPU);
  world().timeout = timeout;
  world().backend = make_backend(world().device, store_prefix(), rank, world_size, timeout);
}

}  // namespace

bool is_initialized() { return static_cast<bool>(world().backend); }

std::string listen_address() { return world().listen_address; }

void destroy() {
  world().backend.reset();
  world().store.reset();
}

int64_t Group::size() const { return impl_ ? static_cast<int64_t>(impl_->ranks.size()) : get_world_size(); }
int64_t Group::rank() const { return impl_ ? impl_->rank : get_global_rank(); }

Group new_group(const std::vector<int64_t>& ranks) {
  std::vector<int64_t> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  std::string list;
  for (size_t i = 0; i < sorted.size(); ++i) list += (i ? "," : "") + std::to_string(sorted[i]);
  const int64_t me = get_global_rank(), world_size = get_world_size();
  if (sorted.empty()) throw std::invalid_argument("dist::new_group: no ranks given");
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw std::invalid_argument("dist::new_group: ranks [" + list + "] name a rank twice");
  if (sorted.front() < 0 || sorted.back() >= world_size) {
    throw std::invalid_argument("dist::new_group: ranks [" + list + "] must lie in [0, " + std::to_string(world_size) +
                                ") (WORLD_SIZE)");
  }
  const auto at = std::find(sorted.begin(), sorted.end(), me);
  if (at == sorted.end()) {
    throw std::invalid_argument("dist::new_group: rank " + std::to_string(me) + " is not among ranks [" + list +
                                "]; only the members make a group");
  }
  auto impl = std::make_shared<Group::Impl>();
  impl->ranks = sorted;
  impl->rank = at - sorted.begin();
  if (sorted.size() > 1) {
    pg();  // the world's group must exist: the subgroup meets through its store
    // The members make the same groups in the same order: the count of earlier groups of these ranks names this one.
    const int64_t made = world().subgroups_made[list]++;
    const std::string prefix = store_prefix() + "/group_" + list + "_" + std::to_string(made);
    try {
      impl->backend =
          make_backend(world().device, prefix, impl->rank, static_cast<int64_t>(sorted.size()), world().timeout);
    } catch (const std::exception& e) {
      throw std::runtime_error("dist: rank " + std::to_string(me) + " could not form the group of ranks [" + list +
                               "] (did every member call new_group?): " + brief_error(e));
    }
  }
  return Group(std::move(impl));
}

void barrier() {
  if (get_world_size() == 1) return;
  run(pg().barrier(), "barrier");
}

// NCCL takes CUDA tensors only: CPU tensors (the batch's loss and sample counts, RNG bytes, seeds) go through the
// backend's device and back.
at::Tensor on_backend_device(const at::Tensor& t) {
  return world().device.is_cuda() && !t.is_cuda() ? t.to(world().device) : t;
}

void all_reduce(at::Tensor& tensor, ReduceOp op, const Group& group) {
  if (group.size() == 1) return;
  at::Tensor d = on_backend_device(tensor);
  std::vector<at::Tensor> v{d};
  c10d::AllreduceOptions o;
  o.reduceOp = to_c10d(op);
  run(pg(group).allreduce(v, o), "all_reduce");
  if (!d.is_same(tensor)) tensor.copy_(d);
}

Handle all_reduce_async(at::Tensor& tensor, const Group& group) {
  if (group.size() == 1) return Handle();
  std::vector<at::Tensor> v{tensor};
  auto work = pg(group).allreduce(v);
  return Handle([work] { run(work, "all_reduce"); });
}

Handle all_gather_into_async(at::Tensor& output, const at::Tensor& input, const Group& group) {
  const int64_t size = group.size();
  if (output.numel() != input.numel() * size) {
    throw std::invalid_argument("dist: all_gather_into_async needs an output of " +
                                std::to_string(input.numel() * size) + " elements, got " +
                                std::to_string(output.numel()));
  }
  if (size == 1) {
    output.copy_(input);
    return Handle();
  }
  at::Tensor in = input;  // the backend's signature takes it by reference
  auto work = pg(group)._allgather_base(output, in);
  return Handle([work] { run(work, "all_gather"); });
}

Handle reduce_scatter_async(at::Tensor& output, at::Tensor& input, const Group& group) {
  const int64_t size = group.size();
  if (output.numel() * size != input.numel()) {
    throw std::invalid_argument("dist: reduce_scatter_async needs an output of 1/" + std::to_string(size) +
                                " of the input's " + std::to_string(input.numel()) + " elements, got " +
                                std::to_string(output.numel()));
  }
  if (size == 1) {
    output.copy_(input);
    return Handle();
  }
  auto work = pg(group)._reduce_scatter_base(output, input);
  return Handle([work] { run(work, "reduce_scatter"); });
}

void broadcast(at::Tensor& tensor, int64_t src) {
  if (get_world_size() == 1) return;
  at::Tensor d = on_backend_device(tensor);
  std::vector<at::Tensor> v{d};
  c10d::BroadcastOptions o;
  o.rootRank = src;
  run(pg().broadcast(v, o), "broadcast");
  if (!d.is_same(tensor)) tensor.copy_(d);
}

std::vector<at::Tensor> all_gather(const at::Tensor& tensor, const Group& group) {
  if (group.size() == 1) return {tensor.clone()};
  std::vector<at::Tensor> in{on_backend_device(tensor.contiguous())};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int64_t r = 0; r < group.size(); ++r) out[0].push_back(at::empty_like(in[0]));
  run(pg(group).allgather(out, in), "all_gather");
  if (!tensor.is_cuda() && in[0].is_cuda())
    for (auto& t : out[0]) t = t.cpu();
  return out[0];
}

at::Tensor all_gather_rows(const at::Tensor& rows, const Group& group) {
  if (group.size() == 1) return rows.clone();
  const auto counts = all_gather(at::full({1}, rows.size(0), at::kLong), group);
  int64_t most = 0;
  for (const auto& c : counts) most = std::max(most, c.item<int64_t>());
  at::Tensor padded = at::zeros({most, rows.size(1)}, rows.options());
  if (rows.size(0) > 0) padded.narrow(0, 0, rows.size(0)).copy_(rows);
  std::vector<at::Tensor> parts = all_gather(padded, group);
  for (size_t r = 0; r < parts.size(); ++r) parts[r] = parts[r].narrow(0, 0, counts[r].item<int64_t>());
  return at::cat(parts);
}

std::vector<std::string> all_gather_object(const std::string& bytes) {
  if (get_world_size() == 1) return {bytes};
  at::Tensor len = at::full({1}, static_cast<int64_t>(bytes.size()), at::kLong);
  all_reduce(len, ReduceOp::MAX);
  at::Tensor buf = at::zeros({len.item<int64_t>() + 8}, at::kByte);
  const int64_t n = static_cast<int64_t>(bytes.size());
  std::memcpy(buf.data_ptr(), &n, 8);
  std::memcpy(static_cast<char*>(buf.data_ptr()) + 8, bytes.data(), bytes.size());
  std::vector<std::string> out;
  for (const auto& t : all_gather(buf)) {
    int64_t m = 0;
    std::memcpy(&m, t.data_ptr(), 8);
    out.emplace_back(static_cast<const char*>(t.data_ptr()) + 8, static_cast<size_t>(m));
  }
  return out;
}

}  // namespace composer::dist
