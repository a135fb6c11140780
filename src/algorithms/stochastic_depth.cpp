#include "composer/algorithms/stochastic_depth.h"

#include "algorithms/detail/common.h"
#include "composer/core/fields.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"
#include "composer/models/vision.h"

#include <torch/torch.h>

#include <iostream>

namespace composer {
namespace functional {

double stochastic_depth_rate(int64_t index, int64_t count, double drop_rate, DropDistribution distribution) {
  if (distribution == DropDistribution::UNIFORM || count <= 0) return drop_rate;
  return static_cast<double>(index + 1) / static_cast<double>(count) * drop_rate;
}

at::Tensor sample_drop(const at::Tensor& x, double drop_rate, bool training) {
  const double keep = 1.0 - drop_rate;
  if (!training) return x * keep;
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[0] = x.size(0);
  const at::Tensor mask = (at::rand(shape, x.options()) + keep).floor_();
  return x * mask;
}

std::vector<Replacement> apply_stochastic_depth(torch::nn::Module& model, const std::string& target,
                                                StochasticMethod method, double drop_rate,
                                                DropDistribution distribution, torch::optim::Optimizer* optimizer) {
  algorithms::detail::require_range("apply_stochastic_depth", "drop_rate", drop_rate, 0.0, 1.0);
  ReplacementPolicy policy;
  nn::StochasticBlock::Kind kind;
  if (target == "ResNetBottleneck") {
    kind = nn::StochasticBlock::Kind::BOTTLENECK;
    policy.matches = [](const torch::nn::Module& m) {
      return dynamic_cast<const models::ResNetBottleneck*>(&m) != nullptr;
    };
  } else if (target == "BasicBlock") {
    kind = nn::StochasticBlock::Kind::BASIC;
    policy.matches = [](const torch::nn::Module& m) { return dynamic_cast<const models::BasicBlock*>(&m) != nullptr; };
  } else {
    throw std::invalid_argument("StochasticDepth.target_layer_name must be 'ResNetBottleneck' or 'BasicBlock', got '" +
                                target + "'");
  }
  policy.kind = target;
  const int64_t count = count_module_instances(model, policy.matches);
  policy.replace = [=](torch::nn::Module& m, int64_t index) -> std::shared_ptr<nn::Layer> {
    const double rate = stochastic_depth_rate(index, count, drop_rate, distribution);
    return std::make_shared<nn::StochasticBlock>(dynamic_cast<nn::Composite&>(m), kind, method, rate);
  };
  SurgeryOptions so;
  so.optimizer = optimizer;
  return replace_module_classes(model, {policy}, so);
}

namespace {
const std::vector<std::pair<std::string, StochasticMethod>> kMethods{{"block", StochasticMethod::BLOCK},
                                                                     {"sample", StochasticMethod::SAMPLE}};
const std::vector<std::pair<std::string, DropDistribution>> kDistributions{{"linear", DropDistribution::LINEAR},
                                                                           {"uniform", DropDistribution::UNIFORM}};
}  // namespace

std::string field_text(StochasticMethod value) { return choice_text(value, kMethods); }
void read_field(Hparams& hparams, const std::string& key, StochasticMethod& value) {
  read_choice(hparams, key, value, kMethods);
}
std::string field_text(DropDistribution value) { return choice_text(value, kDistributions); }
void read_field(Hparams& hparams, const std::string& key, DropDistribution& value) {
  read_choice(hparams, key, value, kDistributions);
}

}  // namespace functional

namespace nn {

StochasticBlock::StochasticBlock(Composite& original, Kind k, functional::StochasticMethod m, double rate)
    : kind(k), method(m), drop_rate(rate) {
  for (const auto& name : original.child_names()) add(name, original.child_ptr(name));
}

at::Tensor StochasticBlock::forward(const at::Tensor& x) {
  const auto residual = [&] {
    return kind == Kind::BASIC ? models::basic_residual(*this, x) : models::bottleneck_residual(*this, x);
  };
  if (method == functional::StochasticMethod::SAMPLE) {
    return at::relu(functional::sample_drop(residual(), drop_rate, is_training()) + models::block_shortcut(*this, x));
  }
  if (!is_training()) return at::relu(residual() * (1.0 - drop_rate) + models::block_shortcut(*this, x));
  const bool drop = drop_rate > 0 && at::rand({1}, at::kDouble).item<double>() < drop_rate;
  if (drop) return has("downsample") ? at::relu(child("downsample").forward(x)) : x;
  return at::relu(residual() + models::block_shortcut(*this, x));
}

}  // namespace nn

namespace algorithms {

void StochasticDepthOptions::validate() const {
  detail::require_range("StochasticDepth", "drop_rate", drop_rate_, 0.0, 1.0);
  detail::require_range("StochasticDepth", "drop_warmup", drop_warmup_, 0.0, 1.0);
  if (target_layer_name_ != "ResNetBottleneck" && target_layer_name_ != "BasicBlock") {
    throw std::invalid_argument("StochasticDepth.target_layer_name must be 'ResNetBottleneck' or 'BasicBlock', got '" +
                                target_layer_name_ + "'");
  }
  if (drop_warmup_ > 0 && stochastic_method_ == functional::StochasticMethod::SAMPLE) {
    throw std::invalid_argument("StochasticDepth.drop_warmup applies to stochastic_method 'block' only");
  }
}

StochasticDepth::StochasticDepth(StochasticDepthOptions options) : options_(std::move(options)) { options_.validate(); }

bool StochasticDepth::match(Event event, const State& state) {
  if (event == Event::INIT) return true;
  return event == Event::BATCH_START && options_.drop_warmup() > 0 && state.get_elapsed_duration().has_value();
}

std::optional<int> StochasticDepth::apply(Event event, State& state, Logger& logger) {
  if (event == Event::INIT) {
    // Composer: the full drop_rate at INIT; with a warmup, the first BATCH_START lowers it to the ramp's start.
    const auto done =
        functional::apply_stochastic_depth(*state.model, options_.target_layer_name(), options_.stochastic_method(),
                                           options_.drop_rate(), options_.drop_distribution(), state.optimizer.get());
    if (done.empty()) std::cerr << "composer: StochasticDepth found no " << options_.target_layer_name() << " blocks\n";
    for (const auto& r : done) blocks_.push_back(std::dynamic_pointer_cast<nn::StochasticBlock>(r.new_module));
    return std::nullopt;
  }
  const double elapsed = *state.get_elapsed_duration();
  if (elapsed >= options_.drop_warmup()) {
    // As Composer: after the warmup the blocks keep the last ramped rate; the full rate is only logged.
    logger.log_metrics({{"stochastic_depth/drop_rate", options_.drop_rate()}});
    return std::nullopt;
  }
  const double rate = options_.drop_rate() * elapsed / options_.drop_warmup();
  for (size_t i = 0; i < blocks_.size(); ++i) {
    blocks_[i]->drop_rate = functional::stochastic_depth_rate(
        static_cast<int64_t>(i), static_cast<int64_t>(blocks_.size()), rate, options_.drop_distribution());
  }
  logger.log_metrics({{"stochastic_depth/drop_rate", rate}});
  return std::nullopt;
}

std::string StochasticDepth::repr() const { return options_repr("StochasticDepth", options_); }

}  // namespace algorithms
}  // namespace composer
