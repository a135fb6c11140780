// LowPrecisionNorm: the one implementation behind LowPrecisionLayerNorm and LowPrecisionGroupNorm (Composer's two
// algorithms of those names): at apply_at, replace a kind of norm by a copy that runs in the autocast dtype.
#pragma once

#include "composer/algorithms/module_surgery.h"
#include "composer/core/algorithm.h"
#include "composer/core/fields.h"
#include "composer/core/precision.h"

#include <torch/arg.h>

#include <string>
#include <vector>

namespace composer::algorithms {

struct LowPrecisionNormOptions {
  /// When to replace the norms: INIT, BEFORE_LOAD or AFTER_LOAD.
  TORCH_ARG(Event, apply_at) = Event::INIT;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("apply_at", self.apply_at_, "event of the surgery: 'init', 'before_load' or 'after_load'");
  }
};

/// At apply_at: `surgery` with the run's precision. Required on load (the checkpoint's weights are the new norms').
class LowPrecisionNorm : public Algorithm {
 public:
  using Surgery = std::vector<Replacement> (*)(torch::nn::Module& model, Precision precision,
                                               torch::optim::Optimizer* optimizer);
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  bool required_on_load() const override { return true; }
  std::string repr() const override;
  const LowPrecisionNormOptions& options() const { return options_; }

 protected:
  /// Throws std::invalid_argument naming `name` when apply_at is not INIT, BEFORE_LOAD or AFTER_LOAD.
  LowPrecisionNorm(std::string name, Surgery surgery, LowPrecisionNormOptions options);

 private:
  std::string name_;
  Surgery surgery_;
  LowPrecisionNormOptions options_;
};

}  // namespace composer::algorithms
