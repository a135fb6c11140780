#include "composer/algorithms/channels_last.h"

#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <torch/torch.h>

namespace composer {
namespace functional {

void apply_channels_last(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  const auto convert = [](at::Tensor& t) {
    if (t.defined() && t.dim() == 4) t.set_data(t.contiguous(at::MemoryFormat::ChannelsLast));
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
