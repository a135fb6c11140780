// Layers with PyTorch's parameter names and initialisation, so state_dicts load into the equivalent PyTorch
// modules. Linear calls at::linear (fused bias epilogue on CUDA).
#pragma once

#include "composer/nn/layer.h"

#include <torch/arg.h>

namespace composer::nn {

/// PyTorch's nn.Linear arguments (and LibTorch's torch::nn::LinearOptions): LinearOptions(in, out).bias(false).
struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, out_features);
  /// A learned bias.
  TORCH_ARG(bool, bias) = true;

 public:
  /// The keys a config sets (repr, hyperparameter logging, read_options).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("in_features", self.in_features_, "input width");
    visit("out_features", self.out_features_, "output width");
    visit("bias", self.bias_, "a learned bias");
  }
};

class Linear : public Layer {
 public:
  explicit Linear(const LinearOptions& options);
  /// With a bias.
  Linear(int64_t in_features, int64_t out_features) : Linear(LinearOptions(in_features, out_features)) {}
  at::Tensor forward(const at::Tensor& x) override;
  int64_t in_features, out_features;
  at::Tensor weight, bias;
};

/// PyTorch's nn.Conv2d arguments for square kernels: Conv2dOptions(in, out, 3).padding(1).bias(false).
struct Conv2dOptions {
  Conv2dOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(int64_t, kernel_size);
  TORCH_ARG(int64_t, stride) = 1;
  TORCH_ARG(int64_t, padding) = 0;
  /// A learned bias.
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(int64_t, groups) = 1;

 public:
  /// The keys a config sets (repr, hyperparameter logging, read_options).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("in_channels", self.in_channels_, "input channels");
    visit("out_channels", self.out_channels_, "output channels");
    visit("kernel_size", self.kernel_size_, "square kernel side");
    visit("stride", self.stride_, "step");
    visit("padding", self.padding_, "zeros on each side");
    visit("bias", self.bias_, "a learned bias");
    visit("groups", self.groups_, "channel groups");
  }
};

class Conv2d : public Layer {
 public:
  explicit Conv2d(const Conv2dOptions& options);
  /// Stride 1, no padding, with a bias.
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : Conv2d(Conv2dOptions(in_channels, out_channels, kernel_size)) {}
  /// The options this layer has (for surgery that replaces it with a variant).
  Conv2dOptions options() const;
  at::Tensor forward(const at::Tensor& x) override;
  int64_t in_channels, out_channels, kernel_size, stride, padding, groups;
  at::Tensor weight, bias;
};

class BatchNorm2d : public Layer {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1);
  at::Tensor forward(const at::Tensor& x) override;
  int64_t num_features;
  double eps, momentum;
  at::Tensor weight, bias, running_mean, running_var, num_batches_tracked;
};

class LayerNorm : public Layer {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  at::Tensor forward(const at::Tensor& x) override;
  int64_t dim;
  double eps;
  at::Tensor weight, bias;
};

/// torch.nn.GroupNorm: normalises [N, C, ...] over groups of num_channels / num_groups channels; affine adds a
/// per-channel weight and bias.
class GroupNorm : public Layer {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  at::Tensor forward(const at::Tensor& x) override;
  int64_t num_groups, num_channels;
  double eps;
  bool affine;
  at::Tensor weight, bias;  ///< undefined without affine
};

class Embedding : public Layer {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, double init_std = 1.0);
  at::Tensor forward(const at::Tensor& ids) override;
  at::Tensor weight;
};

class ReLU : public Layer {
 public:
  at::Tensor forward(const at::Tensor& x) override;
};

/// torch.nn.GELU: exact ("none") or the tanh approximation ("tanh", GPT-2's gelu_new); another value is
/// std::invalid_argument.
class GELU : public Layer {
 public:
  explicit GELU(std::string approximate = "none");
  at::Tensor forward(const at::Tensor& x) override;
  const std::string& approximate() const { return approximate_; }

 private:
  std::string approximate_;
};

class Sigmoid : public Layer {
 public:
  at::Tensor forward(const at::Tensor& x) override;
};

class MaxPool2d : public Layer {
 public:
  MaxPool2d(int64_t kernel_size, int64_t stride, int64_t padding = 0);
  at::Tensor forward(const at::Tensor& x) override;
  int64_t kernel_size, stride, padding;
};

/// Global average pooling to [N, C] (AdaptiveAvgPool2d(1) + flatten).
class GlobalAvgPool : public Layer {
 public:
  at::Tensor forward(const at::Tensor& x) override;
};

/// [N, ...] -> [N, prod(...)].
class Flatten : public Layer {
 public:
  at::Tensor forward(const at::Tensor& x) override;
};

class Dropout : public Layer {
 public:
  explicit Dropout(double p = 0.5);
  at::Tensor forward(const at::Tensor& x) override;
  double p;
};

}  // namespace composer::nn
