#include "composer/callbacks/image_visualizer.h"

#include "callbacks/detail/interval_schedule.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>

namespace composer {
namespace {

// Composer's _check_for_image_format: 3 or 4 dimensions and more than one value per sample.
bool is_image_batch(const at::Tensor& t) {
  return t.defined() && (t.dim() == 3 || t.dim() == 4) && t.numel() > t.size(0);
}

}  // namespace

ImageVisualizer::ImageVisualizer(ImageVisualizerOptions options) : options_(std::move(options)) {
  if (options_.mode() == "segmentation") {
    segmentation_ = true;
  } else if (options_.mode() != "input") {
    throw std::invalid_argument("ImageVisualizer.mode is '" + options_.mode() +
                                "', expected 'input' or 'segmentation'");
  }
  callbacks::detail::check_interval(options_.interval(), "ImageVisualizer");
  if (options_.num_images() < 1)
    throw std::invalid_argument("ImageVisualizer.num_images is " + std::to_string(options_.num_images()) +
                                ", expected >= 1");
}

// Once per count that is a multiple of the interval (the first microbatch of the batch), as Composer's
// last_train_time_value_logged.
bool ImageVisualizer::due(const State& state) {
  if (!callbacks::detail::due_once(state, options_.interval(), last_logged_)) return false;
  last_logged_ = callbacks::detail::interval_count(state, options_.interval());
  return true;
}

void ImageVisualizer::before_forward(State& state, Logger& logger) {
  if (!segmentation_ && due(state)) log_inputs(state, logger, "Images/Train");
}

void ImageVisualizer::before_loss(State& state, Logger& logger) {
  if (segmentation_ && due(state)) log_segmentation(state, logger, "Images/Train");
}

void ImageVisualizer::eval_before_forward(State& state, Logger& logger) {
  if (!segmentation_ && state.eval_timestamp.batch == 0) log_inputs(state, logger, "Images/Eval");
}

void ImageVisualizer::eval_after_forward(State& state, Logger& logger) {
  if (segmentation_ && state.eval_timestamp.batch == 0) log_segmentation(state, logger, "Images/Eval");
}

void ImageVisualizer::log_inputs(const State& state, Logger& logger, const std::string& name) const {
  const at::Tensor& inputs = state.batch.at(options_.input_key());
  if (!is_image_batch(inputs)) return;
  at::Tensor images = inputs.narrow(0, 0, std::min(options_.num_images(), inputs.size(0))).detach().cpu();
  if (options_.channels_last() && images.dim() == 4) images = images.permute({0, 3, 1, 2});
  logger.log_images(images.contiguous(), name);
}

void ImageVisualizer::log_segmentation(const State& state, Logger& logger, const std::string& name) const {
  const at::Tensor& inputs = state.batch.at(options_.input_key());
  const at::Tensor& targets = state.batch.at(options_.target_key());
  const at::Tensor& outputs = state.outputs;
  if (!outputs.defined() || outputs.dim() < 3)
    throw std::invalid_argument("ImageVisualizer: segmentation needs per-pixel outputs [N, classes, H, W]");
  const int64_t n = std::min({options_.num_images(), inputs.size(0), targets.size(0), outputs.size(0)});
  const int64_t class_dim = options_.channels_last() ? -1 : 1;
  const int64_t num_classes = outputs.size(class_dim);
  at::Tensor truth = targets.narrow(0, 0, n).detach().cpu();
  // Composer's infer_target_type: one-hot when the targets have the outputs' shape.
  if (truth.sizes() == outputs.narrow(0, 0, n).sizes()) truth = truth.argmax(class_dim);
  truth = truth.to(at::kLong).masked_fill(truth < 0, num_classes);
  const at::Tensor prediction = outputs.narrow(0, 0, n).detach().argmax(class_dim).cpu();
  at::Tensor images = inputs.narrow(0, 0, n).detach().cpu();
  if (options_.channels_last() && images.dim() == 4) images = images.permute({0, 3, 1, 2});
  logger.log_images(images.contiguous(), name);
  // Class indices as [N, 1, H, W] images, scaled into [0, 1] over the classes (and the ignored class above them).
  const auto as_image = [num_classes](const at::Tensor& classes) {
    return (classes.to(at::kFloat) / static_cast<double>(num_classes)).unsqueeze(1).contiguous();
  };
  logger.log_images(as_image(prediction), name + "/prediction");
  logger.log_images(as_image(truth), name + "/ground_truth");
}

}  // namespace composer
