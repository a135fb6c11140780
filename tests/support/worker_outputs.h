// What the distributed tests' worker processes read and write: settings from the environment, the model's whole weights
// (gathered under FSDP) as a pickled name -> tensor dict, and the last value of each l2_norm metric OptimizerMonitor
// logged.
#pragma once

#include "composer/composer.h"

#include <torch/serialize.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace composer::testing {

/// The environment variable `name`, or `fallback` when it is unset or empty.
inline std::string env_or(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

inline void write_weights(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& weights) {
  Dict w(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, value] : weights) w.insert(name, value);
  write_file_atomically(path, torch::pickle_save(w));
}

/// The whole weights: gathered from the shards under FSDP (a collective), the module's own otherwise.
inline std::vector<std::pair<std::string, at::Tensor>> full_weights(Trainer& trainer, torch::nn::Module& model) {
  if (auto* fsdp = dynamic_cast<dist::FullyShardedDataParallel*>(trainer.state().strategy.get()))
    return fsdp->gathered_parameters();
  std::vector<std::pair<std::string, at::Tensor>> w;
  for (const auto& p : model.named_parameters()) w.emplace_back(p.key(), p.value().detach().clone());
  return w;
}

/// The algorithm the FSDP and TP workers' *_ALGORITHM names, with the settings their tests compare: "ema" (smoothing
/// 0.6 every batch; also kept in `ema`), "sam" (rho 0.05), "swa" (averaging every batch from 0.3dur, the average
/// loaded into the model at 0.99dur); std::invalid_argument naming `variable` otherwise.
inline std::shared_ptr<Algorithm> copy_keeping_algorithm(const std::string& name, const std::string& variable,
                                                         std::shared_ptr<algorithms::EMA>& ema) {
  if (name == "ema") {
    ema = std::make_shared<algorithms::EMA>(algorithms::EMAOptions().half_life(std::nullopt).smoothing(0.6));
    return ema;
  }
  if (name == "sam") return std::make_shared<algorithms::SAM>(algorithms::SAMOptions().rho(0.05));
  if (name == "swa") {
    return std::make_shared<algorithms::SWA>(algorithms::SWAOptions()
                                                 .swa_start(Time::from_duration(0.3))
                                                 .swa_end(Time::from_duration(0.99))
                                                 .update_interval(Time::from_batch(1))
                                                 .schedule_swa_lr(false));
  }
  throw std::invalid_argument(variable + " must be ema, sam or swa, got " + name);
}

/// Keeps the last value of each l2_norm metric (OptimizerMonitor's).
struct GradNorms : LoggerDestination {
  std::map<std::string, double> last;
  void log_metrics(const std::map<std::string, double>& metrics, int64_t) override {
    for (const auto& [key, value] : metrics)
      if (key.rfind("l2_norm/", 0) == 0) last[key] = value;
  }
};

}  // namespace composer::testing
