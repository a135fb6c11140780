// Collectives over PyTorch's c10d (Gloo on CPU, NCCL on CUDA), Composer's utils/dist. Every function is a no-op
// (or the identity) when the world size is 1, and an error naming the fix when it is above 1 but the process group
// was not initialised.
#pragma once

#include "composer/dist/env.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace composer::dist {

enum class ReduceOp { SUM, MAX, MIN, PRODUCT };

/// A set of ranks that run collectives among themselves (HYBRID_SHARD's shard and replica groups). Default-made:
/// the whole world. The collectives below that take a Group run among its members only.
class Group {
 public:
  Group() = default;
  /// Its members' count, and this process's rank among them (the world's when default-made).
  int64_t size() const;
  int64_t rank() const;

  struct Impl;  // dist.cpp: the members' backend
  explicit Group(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  const Impl* impl() const { return impl_.get(); }

 private:
  std::shared_ptr<const Impl> impl_;
};
/// The group of `ranks` (distinct global ranks, this process among them), made on each member; every member calls
/// it with the same ranks, the same number of times (other processes need not call it). A group of one rank runs
/// no collectives. std::invalid_argument when `ranks` is empty, holds a rank twice or out of the world, or lacks
/// this process.
Group new_group(const std::vector<int64_t>& ranks);

/// Creates the process group from RANK, WORLD_SIZE, MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default
/// 29500) through a TCPStore: Gloo for CPU devices, NCCL for CUDA ones (where the build has it). Rank 0 hosts the
/// store. Waiting for peers longer than `timeout` fails with a message naming the address and the ranks.
/// World size 1 needs no group: returns at once.
void initialize_dist(const c10::Device& device, std::chrono::milliseconds timeout = std::chrono::seconds(300));
bool is_initialized();
/// Where this rank's CPU (Gloo) backend listens: GLOO_SOCKET_IFNAME's first interface, else COMPOSER_NODE_ADDR
/// (set by `composer-cpp launch --node-addr`), else 127.0.0.1 when MASTER_ADDR is a loopback address, else the host
/// name's address. Empty before initialize_dist or without a CPU backend.
std::string listen_address();
/// Ends the process group (called at exit).
void destroy();

void barrier();
/// In place on every rank (of `group`).
void all_reduce(at::Tensor& tensor, ReduceOp op = ReduceOp::SUM, const Group& group = Group());
/// `tensor` takes rank `src`'s values on every rank.
void broadcast(at::Tensor& tensor, int64_t src = 0);
/// Every rank's tensor (same shape on all ranks of `group`), in rank order.
std::vector<at::Tensor> all_gather(const at::Tensor& tensor, const Group& group = Group());
/// Every rank's rows ([n_r, width], n_r may differ between ranks; the same width and dtype), concatenated in rank
/// order on every rank.
at::Tensor all_gather_rows(const at::Tensor& rows, const Group& group = Group());
/// Every rank's bytes (any length), in rank order: for small objects serialised by the caller.
std::vector<std::string> all_gather_object(const std::string& bytes);

/// A collective in flight.
class Handle {
 public:
  Handle() = default;
  explicit Handle(std::function<void()> wait) : wait_(std::move(wait)) {}
  /// Completes the operation once: the wait function is dropped before it runs, so a wait that threw (a peer died)
  /// is not repeated by a later wait() (destructors wait for what is in flight while that error unwinds).
  void wait() {
    std::function<void()> wait = std::move(wait_);
    wait_ = nullptr;
    if (wait) wait();
  }

 private:
  std::function<void()> wait_;
};
/// Starts a SUM all-reduce of `tensor` in place (over `group`) and returns at once; wait() completes it.
Handle all_reduce_async(at::Tensor& tensor, const Group& group = Group());
/// Starts gathering every rank's (of `group`) `input` into `output` (its size times input's elements, rank r's at
/// [r * n, (r + 1) * n)); both contiguous, on the backend's device. Returns at once; wait() completes it.
Handle all_gather_into_async(at::Tensor& output, const at::Tensor& input, const Group& group = Group());
/// Starts a SUM reduce-scatter over `group`: `output` (input's elements divided by its size) takes this rank's slice of
/// the elementwise sum of every rank's `input`. NCCL reduce-scatters; Gloo does it as an all-reduce and a slice (twice
/// a reduce-scatter's traffic) and may overwrite `input`. Returns at once; wait() completes it.
Handle reduce_scatter_async(at::Tensor& output, at::Tensor& input, const Group& group = Group());

}  // namespace composer::dist
