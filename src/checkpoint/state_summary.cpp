// The State codec's keys read back for a summary: what composer-cpp inspect prints of a checkpoint.
#include "composer/checkpoint/state_codec.h"

#include <ATen/core/Tensor.h>

#include <stdexcept>

namespace composer {

namespace {

using Dict = c10::impl::GenericDict;

std::vector<std::pair<std::string, c10::IValue>> entries(const Dict& d) {
  std::vector<std::pair<std::string, c10::IValue>> out;
  for (const auto& e : d) out.emplace_back(e.key().toStringRef(), e.value());
  return out;
}

// The repr Composer stores tells how to re-create each algorithm: (name, {"repr": ..., ...}).
std::vector<std::string> algorithm_reprs(const c10::IValue& saved) {
  std::vector<std::string> out;
  for (const auto& a : saved.toList()) {
    const auto& entry = a.get().toTupleRef().elements();
    const bool has_repr = entry.at(1).isGenericDict() && entry.at(1).toGenericDict().contains("repr");
    out.push_back(has_repr ? entry.at(1).toGenericDict().at("repr").toStringRef() : entry.at(0).toStringRef());
  }
  return out;
}

}  // namespace

int64_t StateSummary::model_elements() const {
  int64_t total = 0;
  for (const auto& t : model) {
    int64_t n = 1;
    for (const int64_t d : t.shape) n *= d;
    total += n;
  }
  return total;
}

StateSummary summarize_state(const c10::IValue& saved) {
  if (!saved.isGenericDict() || !saved.toGenericDict().contains("model") ||
      !saved.toGenericDict().at("model").isGenericDict())
    throw std::invalid_argument("the checkpoint's state is not a dict with a 'model' dict");
  const Dict d = saved.toGenericDict();
  StateSummary s;
  if (d.contains("run_name")) s.run_name = d.at("run_name").toStringRef();
  if (d.contains("timestamp")) s.timestamp = entries(d.at("timestamp").toGenericDict().at("Timestamp").toGenericDict());
  if (d.contains("metadata")) s.metadata = entries(d.at("metadata").toGenericDict());
  if (d.contains("algorithms")) s.algorithms = algorithm_reprs(d.at("algorithms"));
  if (d.contains("optimizers")) {
    s.optimizers.emplace();
    for (const auto& e : d.at("optimizers").toGenericDict()) s.optimizers->push_back(e.key().toStringRef());
  }
  for (const auto& e : d.at("model").toGenericDict()) {
    const at::Tensor t = e.value().toTensor();
    s.model.push_back({e.key().toStringRef(), t.sizes().vec(), t.scalar_type()});
  }
  return s;
}

}  // namespace composer
