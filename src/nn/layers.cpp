#include "composer/nn/layers.h"

#include "composer/nn/deferred_init.h"
#include "composer/nn/max_pool.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace composer::nn {
namespace {

// PyTorch's default for Linear/Conv: kaiming_uniform_(a=sqrt(5)) weights, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) bias.
void default_init(at::Tensor& weight, at::Tensor& bias, int64_t fan_in) {
  initialize(
      weight, [](at::Tensor& w) { torch::nn::init::kaiming_uniform_(w, std::sqrt(5.0)); }, true);
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    initialize(
        bias, [bound](at::Tensor& b) { b.uniform_(-bound, bound); }, true);
  }
}

// A parameter of ones or zeros (deferred under a DeferredInit).
at::Tensor filled(at::IntArrayRef shape, double value) {
  at::Tensor p = new_parameter(shape);
  initialize(
      p, [value](at::Tensor& t) { t.fill_(value); }, false);
  return p;
}

}  // namespace

Linear::Linear(const LinearOptions& o) : in_features(o.in_features()), out_features(o.out_features()) {
  weight = register_parameter("weight", new_parameter({out_features, in_features}));
  if (o.bias()) bias = register_parameter("bias", new_parameter({out_features}));
  default_init(weight, bias, in_features);
}

at::Tensor Linear::forward(const at::Tensor& x) { return at::linear(x, weight, bias); }

Conv2d::Conv2d(const Conv2dOptions& o)
    : in_channels(o.in_channels()),
      out_channels(o.out_channels()),
      kernel_size(o.kernel_size()),
      stride(o.stride()),
      padding(o.padding()),
      groups(o.groups()) {
  if (groups < 1 || in_channels % groups != 0 || out_channels % groups != 0) {
    throw std::invalid_argument("Conv2d: groups " + std::to_string(groups) + " must divide in_channels " +
                                std::to_string(in_channels) + " and out_channels " + std::to_string(out_channels));
  }
  const int64_t k = kernel_size;
  weight = register_parameter("weight", new_parameter({out_channels, in_channels / groups, k, k}));
  if (o.bias()) bias = register_parameter("bias", new_parameter({out_channels}));
  default_init(weight, bias, in_channels / groups * k * k);
}

Conv2dOptions Conv2d::options() const {
  return Conv2dOptions(in_channels, out_channels, kernel_size)
      .stride(stride)
      .padding(padding)
      .bias(bias.defined())
      .groups(groups);
}

at::Tensor Conv2d::forward(const at::Tensor& x) {
  return at::conv2d(x, weight, bias, {stride, stride}, {padding, padding}, {1, 1}, groups);
}

BatchNorm2d::BatchNorm2d(int64_t n, double e, double m) : num_features(n), eps(e), momentum(m) {
  weight = register_parameter("weight", filled({n}, 1));
  bias = register_parameter("bias", filled({n}, 0));
  running_mean = register_buffer("running_mean", torch::zeros({n}));
  running_var = register_buffer("running_var", torch::ones({n}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::zeros({}, torch::kLong));
}

at::Tensor BatchNorm2d::forward(const at::Tensor& x) {
  if (is_training()) {
    torch::NoGradGuard no_grad;
    num_batches_tracked.add_(1);
  }
  return at::batch_norm(x, weight, bias, running_mean, running_var, is_training(), momentum, eps,
                        /*cudnn_enabled=*/true);
}

LayerNorm::LayerNorm(int64_t d, double e) : dim(d), eps(e) {
  weight = register_parameter("weight", filled({d}, 1));
  bias = register_parameter("bias", filled({d}, 0));
}

at::Tensor LayerNorm::forward(const at::Tensor& x) { return at::layer_norm(x, {dim}, weight, bias, eps); }

GroupNorm::GroupNorm(int64_t groups, int64_t channels, double e, bool aff)
    : num_groups(groups), num_channels(channels), eps(e), affine(aff) {
  if (groups <= 0 || channels % groups != 0) {
    throw std::invalid_argument("GroupNorm: num_channels (" + std::to_string(channels) +
                                ") must be divisible by num_groups (" + std::to_string(groups) + ")");
  }
  if (affine) {
    weight = register_parameter("weight", filled({channels}, 1));
    bias = register_parameter("bias", filled({channels}, 0));
  }
}

at::Tensor GroupNorm::forward(const at::Tensor& x) { return at::group_norm(x, num_groups, weight, bias, eps); }

Embedding::Embedding(int64_t n, int64_t d, double init_std) {
  weight = register_parameter("weight", new_parameter({n, d}));
  initialize(
      weight, [init_std](at::Tensor& w) { w.normal_().mul_(init_std); }, true);
}

at::Tensor Embedding::forward(const at::Tensor& ids) { return at::embedding(weight, ids); }

at::Tensor ReLU::forward(const at::Tensor& x) { return at::relu(x); }
GELU::GELU(std::string approximate) : approximate_(std::move(approximate)) {
  if (approximate_ != "none" && approximate_ != "tanh")
    throw std::invalid_argument("GELU.approximate is '" + approximate_ + "'; expected none or tanh");
}
at::Tensor GELU::forward(const at::Tensor& x) { return at::gelu(x, approximate_); }
at::Tensor Sigmoid::forward(const at::Tensor& x) { return at::sigmoid(x); }

MaxPool2d::MaxPool2d(int64_t k, int64_t s, int64_t p) : kernel_size(k), stride(s), padding(p) {}
at::Tensor MaxPool2d::forward(const at::Tensor& x) { return nn::max_pool2d(x, kernel_size, stride, padding); }

at::Tensor GlobalAvgPool::forward(const at::Tensor& x) { return x.mean({2, 3}); }
at::Tensor Flatten::forward(const at::Tensor& x) { return x.flatten(1); }

Dropout::Dropout(double prob) : p(prob) {
  if (prob < 0 || prob >= 1) throw std::invalid_argument("Dropout.p must be in [0, 1), got " + std::to_string(prob));
}
at::Tensor Dropout::forward(const at::Tensor& x) { return at::dropout(x, p, is_training()); }

}  // namespace composer::nn
