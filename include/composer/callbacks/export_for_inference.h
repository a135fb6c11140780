// ExportForInferenceCallback: writes the trained model for inference at the end of training (Composer's
// ExportForInferenceCallback), as TorchScript or as safetensors weights, to a local path or an object store.
#pragma once

#include "composer/checkpoint/inference_export.h"
#include "composer/core/callback.h"
#include "composer/core/fields.h"

#include <torch/arg.h>

#include <optional>
#include <string>
#include <vector>

namespace composer {

struct ExportForInferenceOptions {
  /// Required: "torchscript" (a module torch.jit.load runs) or "safetensors" (the weights).
  TORCH_ARG(Required<std::string>, save_format);
  /// Required: a file path, or an object-store URI (s3://bucket/key, file://...) to upload the file to.
  TORCH_ARG(Required<std::string>, save_path);
  /// The batch fields the exported forward takes, in order (default: input_ids for language data, else position 0).
  TORCH_ARG(std::vector<std::string>, input_names) = {};

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("save_format", self.save_format_, "required: torchscript or safetensors");
    visit("save_path", self.save_path_, "required: the file, or an object-store URI");
    visit("input_names", self.input_names_, "batch fields the exported forward takes");
  }
};

/// At AFTER_DATALOADER of the first batch, keeps that batch's input fields (inference_inputs) as the sample to trace;
/// at FIT_END, rank 0 writes export_for_inference(model, sample, save_path, format) (every rank takes part when the
/// strategy shards the model, which is gathered for it) and, for a URI, uploads the file and removes the local copy.
class ExportForInferenceCallback : public Callback {
 public:
  /// Throws std::invalid_argument naming a missing save_path or an unknown save_format.
  explicit ExportForInferenceCallback(ExportForInferenceOptions options);
  void after_dataloader(State& state, Logger& logger) override;
  void fit_end(State& state, Logger& logger) override;
  /// Exports now (what fit_end does), with `sample` as the traced input when no batch was seen.
  void export_model(State& state, const Batch& sample = Batch());

 private:
  ExportForInferenceOptions options_;
  ExportFormat format_;
  Batch sample_;
};

}  // namespace composer
