// StochasticDepth: randomly skips residual branches while training (Composer's StochasticDepth, Huang et al. 2016).
#pragma once

#include "composer/algorithms/module_surgery.h"
#include "composer/core/algorithm.h"
#include "composer/core/time.h"
#include "composer/nn/layer.h"

#include <torch/arg.h>

#include <string>

namespace composer {
class Hparams;
namespace functional {

enum class StochasticMethod { BLOCK, SAMPLE };
enum class DropDistribution { UNIFORM, LINEAR };
/// Field-list conversions (core/fields.h): 'block', 'sample'; 'linear', 'uniform'.
std::string field_text(StochasticMethod value);
void read_field(Hparams& hparams, const std::string& key, StochasticMethod& value);
std::string field_text(DropDistribution value);
void read_field(Hparams& hparams, const std::string& key, DropDistribution& value);

/// Drop rate of the i-th (0-based) of n target blocks: (i + 1) / n * drop_rate if linear, else drop_rate.
double stochastic_depth_rate(int64_t index, int64_t count, double drop_rate, DropDistribution distribution);
/// Training: x * floor(keep + U) per sample (U uniform in [0, 1), keep = 1 - rate); eval: x * keep.
at::Tensor sample_drop(const at::Tensor& x, double drop_rate, bool training);

/// Replaces every block named `target_layer_name` ("ResNetBottleneck"; "BasicBlock" also works here) with a
/// StochasticBlock owning the same layers.
std::vector<Replacement> apply_stochastic_depth(torch::nn::Module& model,
                                                const std::string& target_layer_name = "ResNetBottleneck",
                                                StochasticMethod method = StochasticMethod::BLOCK,
                                                double drop_rate = 0.2,
                                                DropDistribution distribution = DropDistribution::LINEAR,
                                                torch::optim::Optimizer* optimizer = nullptr);

}  // namespace functional

namespace nn {

/// A residual block (same children and parameter names as the block it replaced) whose residual branch is dropped:
/// Block method: while training the whole branch is skipped with probability drop_rate (the output is then
/// relu(downsample(x)), or x without downsample); in eval the branch is scaled by 1 - drop_rate. Sample method: each
/// sample's branch is kept with probability 1 - drop_rate (sample_drop).
class StochasticBlock : public Composite {
 public:
  enum class Kind { BASIC, BOTTLENECK };
  StochasticBlock(Composite& original, Kind kind, functional::StochasticMethod method, double drop_rate);
  at::Tensor forward(const at::Tensor& x) override;
  Kind kind;
  functional::StochasticMethod method;
  double drop_rate;
};

}  // namespace nn

namespace algorithms {

struct StochasticDepthOptions {
  /// Class name of the residual blocks to make stochastic.
  TORCH_ARG(std::string, target_layer_name) = "ResNetBottleneck";
  TORCH_ARG(functional::StochasticMethod, stochastic_method) = functional::StochasticMethod::BLOCK;
  /// Drop probability of the deepest block (linear) or of every block (uniform), in [0, 1].
  TORCH_ARG(double, drop_rate) = 0.2;
  TORCH_ARG(functional::DropDistribution, drop_distribution) = functional::DropDistribution::LINEAR;
  /// Fraction of training over which the rates ramp up linearly from 0 (block method only).
  TORCH_ARG(double, drop_warmup) = 0.0;

 public:
  void validate() const;
  /// The field list: repr, YAML and repr parsing, hyperparameter logging and the docs table (core/fields.h).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("target_layer_name", self.target_layer_name_,
          "class name of the residual blocks to make stochastic: 'ResNetBottleneck' or 'BasicBlock'");
    visit("stochastic_method", self.stochastic_method_, "'block' (drop whole blocks) or 'sample' (drop per sample)");
    visit("drop_rate", self.drop_rate_,
          "drop probability of the deepest block (linear) or of every block (uniform), in [0, 1]");
    visit("drop_distribution", self.drop_distribution_, "'linear' (deeper blocks drop more) or 'uniform'");
    visit("drop_warmup", self.drop_warmup_, "fraction of training over which the rates ramp up from 0 (block method)");
  }
};

/// INIT: the surgery at the full drop_rate; BATCH_START before drop_warmup: rates scaled by elapsed / drop_warmup.
/// After the warmup the blocks keep the last ramped rate (Composer stops updating them) and the full rate is logged.
class StochasticDepth : public Algorithm {
 public:
  explicit StochasticDepth(StochasticDepthOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  bool required_on_load() const override { return true; }
  std::string repr() const override;

 private:
  StochasticDepthOptions options_;
  std::vector<std::shared_ptr<nn::StochasticBlock>> blocks_;
};

}  // namespace algorithms
}  // namespace composer
