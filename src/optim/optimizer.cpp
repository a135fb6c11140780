#include "composer/optim/optimizer.h"

#include "composer/core/serialization.h"
#include "composer/utils/compat.h"
#include "composer/utils/type_name.h"

#include <torch/serialize.h>

#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace composer::optim {
namespace {

constexpr const char* kArchiveKey = "composer_state_dict";

at::Tensor bytes_tensor(const char* data, size_t size) {
  at::Tensor t = at::empty({static_cast<int64_t>(size)}, at::kByte);
  if (size > 0) std::memcpy(t.data_ptr(), data, size);
  return t;
}

std::vector<char> tensor_bytes(const at::Tensor& tensor) {
  const at::Tensor t = tensor.contiguous();
  const char* data = static_cast<const char*>(t.data_ptr());
  return std::vector<char>(data, data + t.numel());
}

const Optimizer* ours(const torch::optim::Optimizer& o) { return dynamic_cast<const Optimizer*>(&o); }
Optimizer* ours(torch::optim::Optimizer& o) { return dynamic_cast<Optimizer*>(&o); }

}  // namespace

void Optimizer::report_per_parameter_metrics(const at::Tensor& param, const std::string& name,
                                             std::map<std::string, double>& metrics) const {
  const auto squares = per_parameter_squares(param, 0, param.numel());
  if (!squares) return;
  const std::vector<std::string> keys = per_parameter_norm_keys();
  for (size_t i = 0; i < keys.size() && i < squares->size(); ++i)
    metrics[keys[i] + "/" + name] = std::sqrt((*squares)[i]);
}

void Optimizer::save(torch::serialize::OutputArchive& archive) const {
  const std::vector<char> bytes = torch::pickle_save(state_dict());
  archive.write(kArchiveKey, bytes_tensor(bytes.data(), bytes.size()));
}

void Optimizer::load(torch::serialize::InputArchive& archive) {
  at::Tensor bytes;
  if (!archive.try_read(kArchiveKey, bytes)) {
    throw std::invalid_argument("optimizer archive has no '" + std::string(kArchiveKey) +
                                "': it was not saved from a composer::optim optimizer");
  }
  load_state_dict(torch::pickle_load(tensor_bytes(bytes)));
}

c10::IValue optimizer_state_dict(const torch::optim::Optimizer& optimizer) {
  if (const Optimizer* o = ours(optimizer)) return o->state_dict();
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream os;
  archive.save_to(os);
  const std::string bytes = os.str();
  Dict d = new_dict();
  d.insert("torch_archive", bytes_tensor(bytes.data(), bytes.size()));
  return d;
}

void load_optimizer_state_dict(torch::optim::Optimizer& optimizer, const c10::IValue& state) {
  if (Optimizer* o = ours(optimizer)) return o->load_state_dict(state);
  if (!state.isGenericDict()) throw std::invalid_argument("optimizer state must be a dict");
  const std::vector<char> bytes =
      tensor_bytes(dict_get(state.toGenericDict(), "torch_archive", "optimizer state").toTensor());
  torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size());
  optimizer.load(archive);
}

std::vector<double> initial_lrs(const torch::optim::Optimizer& optimizer) {
  if (const Optimizer* o = ours(optimizer)) return o->initial_lrs();
  std::vector<double> lrs;
  for (const auto& g : optimizer.param_groups()) lrs.push_back(g.options().get_lr());
  return lrs;
}

const torch::optim::Optimizer& checkpointed_optimizer(const torch::optim::Optimizer& optimizer) {
  const Optimizer* o = ours(optimizer);
  return o ? o->checkpointed() : optimizer;
}

void Optimizer::set_graph_capture(bool on) {
  if (on) {
    throw std::invalid_argument(class_name_of(*this) +
                                " cannot be recorded in a CUDA graph; DecoupledSGDW and DecoupledAdamW can");
  }
}

bool supports_graph_capture(const torch::optim::Optimizer& optimizer) {
  const Optimizer* o = ours(optimizer);
  return o && o->supports_graph_capture();
}

void erase_param_state(torch::optim::Optimizer& optimizer, const at::Tensor& param) {
  if (Optimizer* o = ours(optimizer)) return o->erase_state(param);
  compat::erase_optimizer_state(optimizer, param);
}

}  // namespace composer::optim
