#include "composer/models/initializers.h"

#include "composer/nn/layers.h"

#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <utility>

namespace composer::models {
namespace {

const std::vector<std::pair<std::string, Initializer>>& names() {
  static const std::vector<std::pair<std::string, Initializer>> table = {
      {"kaiming_normal", Initializer::KAIMING_NORMAL},
      {"kaiming_uniform", Initializer::KAIMING_UNIFORM},
      {"bn_uniform", Initializer::BN_UNIFORM},
      {"bn_ones", Initializer::BN_ONES},
      {"xavier_uniform", Initializer::XAVIER_UNIFORM},
      {"xavier_normal", Initializer::XAVIER_NORMAL},
      {"linear_log_constant_bias", Initializer::LINEAR_LOG_CONSTANT_BIAS},
  };
  return table;
}

// The weight of a Linear or Conv2d (ours or torch's), else undefined.
at::Tensor weight_of(torch::nn::Module& m) {
  if (auto* l = dynamic_cast<nn::Linear*>(&m)) return l->weight;
  if (auto* c = dynamic_cast<nn::Conv2d*>(&m)) return c->weight;
  if (auto* l = dynamic_cast<torch::nn::LinearImpl*>(&m)) return l->weight;
  if (auto* c = dynamic_cast<torch::nn::Conv2dImpl*>(&m)) return c->weight;
  return {};
}

// The weight and bias of a BatchNorm2d (ours or torch's), else undefined.
std::pair<at::Tensor, at::Tensor> batch_norm_of(torch::nn::Module& m) {
  if (auto* b = dynamic_cast<nn::BatchNorm2d*>(&m)) return {b->weight, b->bias};
  if (auto* b = dynamic_cast<torch::nn::BatchNorm2dImpl*>(&m)) return {b->weight, b->bias};
  return {};
}

at::Tensor linear_bias_of(torch::nn::Module& m) {
  if (auto* l = dynamic_cast<nn::Linear*>(&m)) return l->bias;
  if (auto* l = dynamic_cast<torch::nn::LinearImpl*>(&m)) return l->bias;
  return {};
}

void init_one(torch::nn::Module& m, Initializer initializer) {
  switch (initializer) {
    case Initializer::KAIMING_NORMAL:
    case Initializer::KAIMING_UNIFORM:
    case Initializer::XAVIER_UNIFORM:
    case Initializer::XAVIER_NORMAL: {
      at::Tensor w = weight_of(m);
      if (!w.defined()) return;
      if (initializer == Initializer::KAIMING_NORMAL) torch::nn::init::kaiming_normal_(w);
      if (initializer == Initializer::KAIMING_UNIFORM) torch::nn::init::kaiming_uniform_(w);
      if (initializer == Initializer::XAVIER_UNIFORM) torch::nn::init::xavier_uniform_(w);
      if (initializer == Initializer::XAVIER_NORMAL) torch::nn::init::xavier_normal_(w);
      return;
    }
    case Initializer::BN_UNIFORM:
    case Initializer::BN_ONES: {
      auto [w, b] = batch_norm_of(m);
      if (!w.defined()) return;
      // Composer assigns fresh tensors (torch.rand: float32 on the CPU), copied here into the parameters.
      w.copy_(initializer == Initializer::BN_ONES ? at::ones_like(w) : at::rand(w.sizes()));
      if (b.defined()) b.zero_();
      return;
    }
    case Initializer::LINEAR_LOG_CONSTANT_BIAS: {
      at::Tensor b = linear_bias_of(m);
      if (b.defined()) b.fill_(-std::log(static_cast<float>(b.size(0))));
      return;
    }
  }
}

void apply_post_order(torch::nn::Module& m, Initializer initializer) {
  for (const auto& child : m.children()) apply_post_order(*child, initializer);
  init_one(m, initializer);
}

}  // namespace

Initializer initializer_from_string(const std::string& name) {
  for (const auto& [n, i] : names())
    if (n == name) return i;
  std::string known;
  for (const auto& [n, i] : names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown initializer '" + name + "'; expected one of " + known);
}

std::string to_string(Initializer initializer) {
  for (const auto& [n, i] : names())
    if (i == initializer) return n;
  return "?";
}

std::vector<std::string> initializer_names() {
  std::vector<std::string> out;
  for (const auto& [n, i] : names()) out.push_back(n);
  return out;
}

void apply_initializer(torch::nn::Module& module, Initializer initializer) {
  torch::NoGradGuard no_grad;
  apply_post_order(module, initializer);
}

}  // namespace composer::models
