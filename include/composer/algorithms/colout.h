// ColOut: drops random rows and columns of images, shrinking them (Composer's ColOut).
#pragma once

#include "composer/core/algorithm.h"
#include "composer/data/dataset_loader.h"

#include <torch/arg.h>

#include <optional>
#include <utility>

namespace composer {
class Hparams;
namespace functional {

/// Whether to crop the targets too: always, never, or when they are images with the input's height and width.
enum class ResizeTarget { AUTO, YES, NO };
/// Field-list conversions (core/fields.h): 'auto', 'True', 'False'; reads auto/true/false.
std::string field_text(ResizeTarget value);
void read_field(Hparams& hparams, const std::string& key, ResizeTarget& value);

/// Keeps int((1 - p_row) H) random rows and int((1 - p_col) W) random columns (in order, the same for the whole
/// batch) of `input` [..., H, W]; `target` gets the same crop when resize_target says so (an undefined target is
/// returned undefined). Randomness from `gen` when given, else the default generator.
std::pair<at::Tensor, at::Tensor> colout_batch(const at::Tensor& input, const at::Tensor& target = {},
                                               double p_row = 0.15, double p_col = 0.15,
                                               ResizeTarget resize_target = ResizeTarget::AUTO,
                                               std::optional<at::Generator> gen = std::nullopt);

/// ColOut per image (a different crop for each sample), as a data-loader transform on the batch's "input" field.
BatchTransform colout_transform(double p_row = 0.15, double p_col = 0.15);

}  // namespace functional

namespace algorithms {

struct ColOutOptions {
  TORCH_ARG(double, p_row) = 0.15;
  TORCH_ARG(double, p_col) = 0.15;
  /// true: one crop per batch on the device at AFTER_DATALOADER; false: per-sample crops in the data loader.
  TORCH_ARG(bool, batch) = true;
  TORCH_ARG(functional::ResizeTarget, resize_target) = functional::ResizeTarget::AUTO;
  TORCH_ARG(BatchKey, input_key) = BatchKey{int64_t{0}};
  TORCH_ARG(BatchKey, target_key) = BatchKey{int64_t{1}};

 public:
  void validate() const;
  /// The field list: repr, YAML and repr parsing, hyperparameter logging and the docs table (core/fields.h).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("p_row", self.p_row_, "fraction of rows dropped");
    visit("p_col", self.p_col_, "fraction of columns dropped");
    visit("batch", self.batch_, "one crop per batch on the device (true) or per sample in the loader (false)");
    visit("resize_target", self.resize_target_, "crop the targets too: 'auto' (when they are images), True or False");
    visit("input_key", self.input_key_, "batch field of the images");
    visit("target_key", self.target_key_, "batch field of the targets");
  }
};

/// Batch mode: AFTER_DATALOADER. Sample mode: FIT_START adds colout_transform() in front of the training
/// DatasetLoader's transforms (other loaders are an error).
class ColOut : public Algorithm {
 public:
  explicit ColOut(ColOutOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  std::string repr() const override;

 private:
  ColOutOptions options_;
  bool transform_added_ = false;
};

}  // namespace algorithms
}  // namespace composer
