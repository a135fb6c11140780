// SelectiveBackprop: trains on the samples of each batch with the highest loss, found by an extra forward pass
// (Composer's SelectiveBackprop).
#pragma once

#include "composer/core/algorithm.h"
#include "composer/core/fields.h"
#include "composer/data/batch.h"

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <functional>
#include <utility>

namespace composer {
namespace functional {

/// Whether to select on this batch: current_duration in [start, end) and, unless interrupt is 0, not every
/// interrupt-th batch ((batch_idx + 1) % interrupt != 0), as Composer's should_selective_backprop.
bool should_selective_backprop(double current_duration, int64_t batch_idx, double start = 0.5, double end = 0.9,
                               int64_t interrupt = 2);

/// Keeps int(keep * N) samples of `input` [N, ...] and `target`, drawn without replacement with probability rising
/// with the rank of their loss (rank r of N, ascending: ((r + 0.5) / N)^(1 / keep - 1), normalised), as Composer's
/// select_using_loss. The losses come from `per_sample_loss(model(x), target)` without gradients, x being `input`
/// scaled by `scale_factor` (<= 1; 3-, 4- or 5-D inputs, linear/bilinear/trilinear) when it is below 1. Throws
/// std::invalid_argument for scale_factor > 1, keep outside (0, 1], a wrongly shaped input or a loss that is not [N].
std::pair<at::Tensor, at::Tensor> select_using_loss(
    const at::Tensor& input, const at::Tensor& target, const std::function<at::Tensor(const at::Tensor&)>& model,
    const std::function<at::Tensor(const at::Tensor& outputs, const at::Tensor& target)>& per_sample_loss,
    double keep = 0.5, double scale_factor = 1.0);

}  // namespace functional

namespace algorithms {

struct SelectiveBackpropOptions {
  /// Fraction of training at which selection starts, in [0, 1].
  TORCH_ARG(double, start) = 0.5;
  /// Fraction of training at which it stops, in [start, 1].
  TORCH_ARG(double, end) = 0.9;
  /// Fraction of each batch kept, in (0, 1]; 1 turns the method off.
  TORCH_ARG(double, keep) = 0.5;
  /// Input scale of the selection pass, in (0, 1].
  TORCH_ARG(double, scale_factor) = 1.0;
  /// Every interrupt-th batch trains on the whole batch; 0 never.
  TORCH_ARG(int64_t, interrupt) = 2;
  TORCH_ARG(BatchKey, input_key) = BatchKey{int64_t{0}};
  TORCH_ARG(BatchKey, target_key) = BatchKey{int64_t{1}};

 public:
  void validate() const;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("start", self.start_, "fraction of training when selection starts, in [0, 1]");
    visit("end", self.end_, "fraction of training when it stops, in [start, 1]");
    visit("keep", self.keep_, "fraction of each batch kept, in (0, 1]");
    visit("scale_factor", self.scale_factor_, "input scale of the selection forward, in (0, 1]");
    visit("interrupt", self.interrupt_, "every interrupt-th batch is kept whole; 0: none");
    visit("input_key", self.input_key_, "batch field of the inputs");
    visit("target_key", self.target_key_, "batch field of the targets");
  }
};

/// AFTER_DATALOADER, when functional::should_selective_backprop says so for the elapsed duration and batch in the
/// epoch: replaces the batch's input and target by functional::select_using_loss's choice, ranking by the model's
/// per_sample_loss (ComposerModel::per_sample_loss) in the run's precision. The Engine runs it before the other
/// algorithms of the event (Engine pass sort_selective_backprop_first). Matches INIT, where it does nothing (Composer
/// binds the model's loss there).
class SelectiveBackprop : public Algorithm {
 public:
  explicit SelectiveBackprop(SelectiveBackpropOptions options = SelectiveBackpropOptions());
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  std::string repr() const override;
  const SelectiveBackpropOptions& options() const { return options_; }

 private:
  SelectiveBackpropOptions options_;
};

}  // namespace algorithms
}  // namespace composer
