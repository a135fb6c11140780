#include "composer/algorithms/blurpool.h"

#include "algorithms/detail/common.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <torch/torch.h>

#include <iostream>
#include <set>

namespace composer {
namespace functional {

at::Tensor default_blur_filter() {
  return (torch::tensor({1.0f, 2.0f, 1.0f}).outer(torch::tensor({1.0f, 2.0f, 1.0f})) / 16.0f).view({1, 1, 3, 3});
}

at::Tensor blur_2d(const at::Tensor& input, int64_t stride, const at::Tensor& filter) {
  if (input.dim() != 4)
    throw std::invalid_argument("blur_2d: input must be [N, C, H, W], got shape " + c10::str(input.sizes()));
  at::Tensor f = filter.defined() ? filter : default_blur_filter();
  f = f.to(input.device(), input.scalar_type());
  if (f.dim() == 2) f = f.view({1, 1, f.size(0), f.size(1)});
  if (f.dim() != 4)
    throw std::invalid_argument("blur_2d: filter must be [kH, kW] or [C, 1, kH, kW], got shape " + c10::str(f.sizes()));
  if (f.size(2) % 2 == 0 || f.size(3) % 2 == 0) {
    throw std::invalid_argument("blur_2d: the filter must have an odd height and width, got " +
                                std::to_string(f.size(2)) + "x" + std::to_string(f.size(3)));
  }
  const int64_t channels = input.size(1);
  if (f.size(0) == 1 && channels > 1) f = f.expand({channels, 1, f.size(2), f.size(3)});
  const int64_t pad_h = f.size(2) / 2, pad_w = f.size(3) / 2;
  // As Composer: an input smaller than the filter even with the padding is returned unblurred (with an odd filter
  // and "same" padding only an image with no rows or columns is).
  if (input.size(2) + 2 * pad_h < f.size(2) || input.size(3) + 2 * pad_w < f.size(3)) return input;
  return at::conv2d(input, f, {}, {stride, stride}, {pad_h, pad_w}, {1, 1}, channels);
}

at::Tensor blurmax_pool2d(const at::Tensor& input, int64_t kernel_size, int64_t stride, int64_t padding,
                          const at::Tensor& filter) {
  const at::Tensor maxs = at::max_pool2d(input, {kernel_size, kernel_size}, {1, 1}, {padding, padding});
  return blur_2d(maxs, stride, filter);
}

void BlurPoolOptions::validate() const {
  if (min_channels_ < 0)
    algorithms::detail::bad_option("BlurPool", "min_channels", ">= 0", static_cast<double>(min_channels_));
}

std::vector<Replacement> apply_blurpool(torch::nn::Module& model, const BlurPoolOptions& options,
                                        torch::optim::Optimizer* optimizer) {
  options.validate();
  std::set<const torch::nn::Module*>
      blurred;  // convolutions already inside a BlurConv2d (Composer's _already_blurpooled)
  for (const auto& m : model.modules(/*include_self=*/false))
    if (auto* b = dynamic_cast<nn::BlurConv2d*>(m.get())) blurred.insert(b->child_ptr("conv").get());
  std::vector<ReplacementPolicy> policies;
  if (options.replace_convs()) {
    policies.push_back(policy_for<nn::Conv2d>([&](nn::Conv2d& conv, int64_t) -> std::shared_ptr<nn::Layer> {
      if (conv.stride <= 1 || conv.in_channels < options.min_channels() || blurred.count(&conv)) return nullptr;
      return std::make_shared<nn::BlurConv2d>(std::dynamic_pointer_cast<nn::Conv2d>(conv.shared_from_this()),
                                              options.blur_first());
    }));
  }
  if (options.replace_maxpools()) {
    policies.push_back(policy_for<nn::MaxPool2d>([](nn::MaxPool2d& pool, int64_t) -> std::shared_ptr<nn::Layer> {
      return std::make_shared<nn::BlurMaxPool2d>(pool);
    }));
  }
  SurgeryOptions so;
  so.optimizer = optimizer;
  return replace_module_classes(model, policies, so);
}

}  // namespace functional

namespace nn {

BlurConv2d::BlurConv2d(std::shared_ptr<Conv2d> conv, bool first)
    : blur_first(first), blur_stride(first ? 1 : conv->stride) {
  if (!first) conv->stride = 1;  // the convolution runs at stride 1; the blur subsamples
  add("conv", std::move(conv));
  blur_filter = register_buffer("blur_filter", functional::default_blur_filter());
}

at::Tensor BlurConv2d::forward(const at::Tensor& x) {
  if (blur_first) return child("conv").forward(functional::blur_2d(x, blur_stride, blur_filter));
  return functional::blur_2d(child("conv").forward(x), blur_stride, blur_filter);
}

BlurMaxPool2d::BlurMaxPool2d(const MaxPool2d& pool)
    : kernel_size(pool.kernel_size), stride(pool.stride), padding(pool.padding) {
  filt2d = register_buffer("filt2d", functional::default_blur_filter());
}

at::Tensor BlurMaxPool2d::forward(const at::Tensor& x) {
  return functional::blurmax_pool2d(x, kernel_size, stride, padding, filt2d);
}

}  // namespace nn

namespace algorithms {

BlurPool::BlurPool(functional::BlurPoolOptions options) : options_(std::move(options)) { options_.validate(); }

bool BlurPool::match(Event event, const State&) { return event == Event::INIT; }

std::optional<int> BlurPool::apply(Event, State& state, Logger&) {
  const auto done = functional::apply_blurpool(*state.model, options_, state.optimizer.get());
  if (done.empty()) std::cerr << "composer: BlurPool found no strided Conv2d or MaxPool2d to replace\n";
  return std::nullopt;
}

std::string BlurPool::repr() const { return options_repr("BlurPool", options_); }

}  // namespace algorithms
}  // namespace composer
