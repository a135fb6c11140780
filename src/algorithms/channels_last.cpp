#include "composer/algorithms/channels_last.h"

#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <torch/torch.h>

namespace composer {
namespace functional {

void apply_channels_last(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  // As torch's Module.to(memory_format=channels_last): Tensor.to restrides unless the tensor already suggests
  // channels-last. contiguous(ChannelsLast) would keep a one-channel weight ([O, 1, kH, kW]) in its NCHW strides,
  // which count as contiguous in both formats; the convolution then picks NCHW from that weight, and every layer
  // after it runs in NCHW until the next convolution converts its input back (measured: bench/results/step_profile.md).
  const auto convert = [](at::Tensor& t) {
    if (t.defined() && t.dim() == 4)
      t.set_data(t.to(t.options(), /*non_blocking=*/false, /*copy=*/false, at::MemoryFormat::ChannelsLast));
  };
  for (auto& p : model.parameters()) {
    convert(p);
    if (p.grad().defined()) convert(p.mutable_grad());
  }
  for (auto& b : model.buffers()) convert(b);
}

}  // namespace functional

namespace algorithms {

bool ChannelsLast::match(Event event, const State&) { return event == Event::INIT; }

std::optional<int> ChannelsLast::apply(Event, State& state, Logger&) {
  functional::apply_channels_last(*state.model);
  return std::nullopt;
}

}  // namespace algorithms
}  // namespace composer
