#include "composer/callbacks/export_for_inference.h"

#include "composer/core/state.h"
#include "composer/dist/env.h"
#include "composer/dist/strategy.h"
#include "composer/models/composer_model.h"
#include "composer/storage/object_store.h"

#include <ATen/ATen.h>

#include <unistd.h>
#include <filesystem>
#include <iostream>
#include <stdexcept>

namespace composer {

ExportForInferenceCallback::ExportForInferenceCallback(ExportForInferenceOptions options)
    : options_(std::move(options)) {
  const std::string& format =
      required_value(options_.save_format(), "ExportForInferenceCallback", "save_format", "torchscript or safetensors");
  const std::string& path =
      required_value(options_.save_path(), "ExportForInferenceCallback", "save_path", "a file path or URI");
  if (path.empty()) throw std::invalid_argument("ExportForInferenceCallback.save_path is empty");
  // The destination is checked now, not after training: an unknown scheme, a missing bucket or object name.
  try {
    if (is_object_store_uri(path)) {
      make_object_store(path);
      if (parse_uri(path).path.empty()) throw std::invalid_argument("'" + path + "' names no object after the bucket");
    }
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("ExportForInferenceCallback.save_path ") + e.what());
  }
  try {
    format_ = parse_export_format(format);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("ExportForInferenceCallback.") + e.what());
  }
}

void ExportForInferenceCallback::after_dataloader(State& state, Logger&) {
  if (!sample_.empty() || format_ != ExportFormat::TORCHSCRIPT) return;
  std::vector<std::pair<std::string, at::Tensor>> fields;
  const Batch inputs = inference_inputs(state.batch, options_.input_names());
  for (const auto& [name, tensor] : inputs.fields()) fields.emplace_back(name, tensor.detach().clone());
  sample_ = Batch(std::move(fields));
}

void ExportForInferenceCallback::fit_end(State& state, Logger&) { export_model(state); }

void ExportForInferenceCallback::export_model(State& state, const Batch& sample) {
  const Batch& inputs = sample_.empty() ? sample : sample_;
  if (format_ == ExportFormat::TORCHSCRIPT && inputs.empty()) {
    throw std::invalid_argument(
        "ExportForInferenceCallback: no batch was seen to trace the model with (torchscript traces the forward)");
  }
  // A sharded model gathers its parameters, in their own dtype (the export is the full-precision model).
  const auto gathered = state.strategy->gather_full_weights();
  if (dist::get_global_rank() != 0) return;
  const std::string& save_path = *options_.save_path();
  const bool remote = is_object_store_uri(save_path);
  const std::string object = remote ? parse_uri(save_path).path : std::string();
  // A remote export is written to a temporary file first; export_for_inference creates a local path's folders.
  const std::string local =
      remote ? (std::filesystem::temp_directory_path() / ("composer-export-" + std::to_string(::getpid()) + "-" +
                                                          std::filesystem::path(object).filename().string()))
                   .string()
             : save_path;
  export_for_inference(*state.model, inputs.to(state.device), local, format_);
  if (remote) {
    try {
      make_object_store(save_path)->upload_object(object, local);
    } catch (...) {
      std::filesystem::remove(local);
      throw;
    }
    std::filesystem::remove(local);
  }
  std::cerr << "ExportForInferenceCallback: wrote the model as " << export_format_name(format_) << " to " << save_path
            << "\n";
}

}  // namespace composer
