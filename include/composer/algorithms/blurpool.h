// BlurPool: anti-aliased downsampling; strided convolutions and max-pools blur before they subsample
// (Composer's BlurPool, Zhang 2019).
#pragma once

#include "composer/algorithms/module_surgery.h"
#include "composer/core/algorithm.h"
#include "composer/nn/layers.h"

#include <torch/arg.h>

namespace composer {
namespace functional {

/// [[1, 2, 1], [2, 4, 2], [1, 2, 1]] / 16 as a [1, 1, 3, 3] float tensor.
at::Tensor default_blur_filter();
/// Depthwise convolution of `input` [N, C, H, W] with `filter` (default: default_blur_filter()), "same" padding,
/// at `stride`. The filter is [kH, kW] or [C or 1, 1, kH, kW] with odd kH and kW (std::invalid_argument otherwise, as
/// Composer raises).
at::Tensor blur_2d(const at::Tensor& input, int64_t stride = 1, const at::Tensor& filter = {});
/// max_pool2d at stride 1 followed by blur_2d at `stride`.
at::Tensor blurmax_pool2d(const at::Tensor& input, int64_t kernel_size, int64_t stride = 2, int64_t padding = 0,
                          const at::Tensor& filter = {});

struct BlurPoolOptions {
  /// Replace Conv2d layers with stride > 1 and at least min_channels input channels.
  TORCH_ARG(bool, replace_convs) = true;
  /// Replace every MaxPool2d.
  TORCH_ARG(bool, replace_maxpools) = true;
  /// Blur before the convolution (cheaper) rather than after a stride-1 convolution.
  TORCH_ARG(bool, blur_first) = true;
  TORCH_ARG(int64_t, min_channels) = 16;

 public:
  void validate() const;
  /// The field list: repr, YAML and repr parsing, hyperparameter logging and the docs table (core/fields.h).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("replace_convs", self.replace_convs_,
          "replace Conv2d layers with stride > 1 and at least min_channels inputs");
    visit("replace_maxpools", self.replace_maxpools_, "replace every MaxPool2d");
    visit("blur_first", self.blur_first_, "blur before the convolution (cheaper) rather than after a stride-1 one");
    visit("min_channels", self.min_channels_, "convolutions with fewer input channels stay");
  }
};

/// Replaces the layers BlurPoolOptions selects with BlurConv2d / BlurMaxPool2d. Returns the replacements.
std::vector<Replacement> apply_blurpool(torch::nn::Module& model, const BlurPoolOptions& options = {},
                                        torch::optim::Optimizer* optimizer = nullptr);

}  // namespace functional

namespace nn {

/// A convolution whose stride happens in a blur: blur (stride 1) then conv (stride s), or conv (stride 1) then blur
/// (stride s). Children: "conv" (the replaced Conv2d itself, set to stride 1 when the blur comes after it, so its
/// parameters and their optimizer state carry over); buffer "blur_filter".
class BlurConv2d : public Composite {
 public:
  BlurConv2d(std::shared_ptr<Conv2d> conv, bool blur_first);
  at::Tensor forward(const at::Tensor& x) override;
  bool blur_first;
  int64_t blur_stride;
  at::Tensor blur_filter;
};

/// MaxPool2d at stride 1, then a blur at the pool's stride. Buffer "filt2d".
class BlurMaxPool2d : public Layer {
 public:
  explicit BlurMaxPool2d(const MaxPool2d& pool);
  at::Tensor forward(const at::Tensor& x) override;
  int64_t kernel_size, stride, padding;
  at::Tensor filt2d;
};

}  // namespace nn

namespace algorithms {

using functional::BlurPoolOptions;

/// INIT: functional::apply_blurpool on the model (required on load: it changes the model's structure).
class BlurPool : public Algorithm {
 public:
  explicit BlurPool(functional::BlurPoolOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  bool required_on_load() const override { return true; }
  std::string repr() const override;

 private:
  functional::BlurPoolOptions options_;
};

}  // namespace algorithms
}  // namespace composer
