// Exporting a trained model for inference (Composer's export_for_inference): TorchScript, which Python's
// torch.jit.load and C++'s torch::jit::load run without this library, or the weights alone as safetensors.
#pragma once

#include "composer/data/batch.h"

#include <string>
#include <vector>

namespace composer {

class ComposerModel;

enum class ExportFormat { TORCHSCRIPT, SAFETENSORS };

/// "torchscript" or "safetensors" (case-insensitive); std::invalid_argument names the value and the choices
/// ("onnx" says how to get there: torch.onnx.export of the TorchScript file in Python).
ExportFormat parse_export_format(const std::string& name);
std::string export_format_name(ExportFormat format);

/// The fields of `sample` that the model's forward reads: `input_names` when given (each must be in the batch),
/// else "input_ids" for a language batch, else position 0. Throws std::invalid_argument naming a missing field.
Batch inference_inputs(const Batch& sample, const std::vector<std::string>& input_names = {});

/// Writes `model` to `path` crash-safely (a temporary name, then rename).
/// - TORCHSCRIPT: ComposerModel::forward(batch of `inputs`' fields) traced in eval mode without gradients into a
///   TorchScript module whose parameters and buffers keep the model's names (its state_dict loads into the
///   module); forward takes the fields in order and returns the outputs. Tracing records the operations run for
///   `inputs`: sizes read in C++ (x.size(0)) become constants, so a model that reshapes with them accepts only those
///   shapes, and data-dependent branches follow the sample's path (docs/callbacks.md#exportforinferencecallback).
/// - SAFETENSORS: the model's state_dict (parameters and buffers, on the CPU).
/// The model's training mode is left as it was. Throws std::runtime_error naming the path when it cannot be written,
/// std::invalid_argument when `inputs` is empty or tracing fails (with the reason).
void export_for_inference(ComposerModel& model, const Batch& inputs, const std::string& path, ExportFormat format);

}  // namespace composer
