#include "composer/checkpoint/inference_export.h"

#include "composer/formats/safetensors.h"
#include "composer/models/composer_model.h"
#include "composer/utils/atomic_file.h"
#include "utils/detail/text.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/frontend/tracer.h>

#include <cctype>
#include <map>
#include <sstream>
#include <stdexcept>

namespace composer {
namespace {

// A TorchScript module holding `model`'s parameters and buffers under their names ("module.0.weight" is attribute
// weight of submodule 0 of submodule module), the same tensors, so that tracing finds them as attributes.
class ScriptTree {
 public:
  ScriptTree() : cu_(std::make_shared<torch::jit::CompilationUnit>()), root_(make("")) {}

  void add(const std::string& dotted, const at::Tensor& tensor, bool is_buffer) {
    const auto dot = dotted.rfind('.');
    torch::jit::Module owner = dot == std::string::npos ? root_ : module(dotted.substr(0, dot));
    const std::string name = dot == std::string::npos ? dotted : dotted.substr(dot + 1);
    if (is_buffer) {
      owner.register_buffer(name, tensor);
    } else {
      owner.register_parameter(name, tensor, /*is_buffer=*/false);
    }
  }
  torch::jit::Module& root() { return root_; }

 private:
  torch::jit::Module make(const std::string& path) {
    std::string cls = "__torch__.composer.Exported";
    for (char c : path) cls += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return torch::jit::Module(c10::QualifiedName(cls + (path.empty() ? "" : "_" + std::to_string(modules_.size()))),
                              cu_);
  }
  torch::jit::Module module(const std::string& path) {
    if (auto it = modules_.find(path); it != modules_.end()) return it->second;
    const auto dot = path.rfind('.');
    torch::jit::Module parent = dot == std::string::npos ? root_ : module(path.substr(0, dot));
    torch::jit::Module child = make(path);
    parent.register_module(dot == std::string::npos ? path : path.substr(dot + 1), child);
    modules_.emplace(path, child);
    return child;
  }

  std::shared_ptr<torch::jit::CompilationUnit> cu_;
  torch::jit::Module root_;
  std::map<std::string, torch::jit::Module> modules_;
};

std::vector<char> traced_torchscript(ComposerModel& model, const Batch& inputs) {
  ScriptTree tree;
  for (const auto& p : model.named_parameters()) tree.add(p.key(), p.value(), /*is_buffer=*/false);
  for (const auto& b : model.named_buffers()) tree.add(b.key(), b.value(), /*is_buffer=*/true);
  torch::jit::Stack stack;
  std::vector<std::string> names;
  for (const auto& [name, tensor] : inputs.fields()) {
    stack.emplace_back(tensor);
    names.push_back(name);
  }
  const auto traced = [&](torch::jit::Stack in) -> torch::jit::Stack {
    std::vector<std::pair<std::string, at::Tensor>> fields;
    for (size_t i = 0; i < names.size(); ++i) fields.emplace_back(names[i], in[i].toTensor());
    return {model.forward(Batch(std::move(fields)))};
  };
  std::shared_ptr<torch::jit::tracer::TracingState> state;
  try {
    state = std::get<0>(torch::jit::tracer::trace(
        std::move(stack), traced, [](const at::Tensor&) { return std::string(); }, /*strict=*/true,
        /*force_outplace=*/false, &tree.root(), names));
  } catch (const std::exception& e) {
    std::string why = e.what();
    why = why.substr(0, why.find('\n'));
    throw std::invalid_argument("export_for_inference: tracing the model's forward failed: " + why);
  }
  torch::jit::Module& root = tree.root();
  auto* fn = root._ivalue()->compilation_unit()->create_function(c10::QualifiedName(*root.type()->name(), "forward"),
                                                                 state->graph);
  root.type()->addMethod(fn);
  std::ostringstream out;
  root.save(out);
  const std::string bytes = out.str();
  return {bytes.begin(), bytes.end()};
}

// Runs `write`; a failure to write names the file.
template <class Write>
void write_to(const std::string& path, Write&& write) {
  try {
    write();
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (what.find(path) != std::string::npos) throw std::runtime_error(what);
    throw std::runtime_error("export_for_inference: cannot write '" + path + "': " + what.substr(0, what.find('\n')));
  }
}

}  // namespace

ExportFormat parse_export_format(const std::string& name) {
  const std::string n = detail::to_lower(name);
  if (n == "torchscript") return ExportFormat::TORCHSCRIPT;
  if (n == "safetensors") return ExportFormat::SAFETENSORS;
  if (n == "onnx") {
    throw std::invalid_argument(
        "save_format 'onnx' is not available from C++ (ONNX export is PyTorch's Python exporter); export "
        "'torchscript' and run torch.onnx.export on torch.jit.load(file) in Python");
  }
  throw std::invalid_argument("save_format '" + name + "' is not one of: torchscript, safetensors");
}

std::string export_format_name(ExportFormat format) {
  return format == ExportFormat::TORCHSCRIPT ? "torchscript" : "safetensors";
}

Batch inference_inputs(const Batch& sample, const std::vector<std::string>& input_names) {
  std::vector<std::pair<std::string, at::Tensor>> fields;
  if (!input_names.empty()) {
    for (const auto& name : input_names) {
      if (!sample.has(name)) {
        std::string present;
        for (const auto& key : sample.keys()) present += (present.empty() ? "" : ", ") + key;
        throw std::invalid_argument("input_names: the batch has no field '" + name + "' (fields: " + present + ")");
      }
      fields.emplace_back(name, sample.at(name));
    }
  } else if (sample.has("input_ids")) {
    fields.emplace_back("input_ids", sample.at(std::string("input_ids")));
  } else {
    if (sample.empty()) throw std::invalid_argument("export_for_inference: the sample batch is empty");
    fields.push_back(sample.fields().front());
  }
  return Batch(std::move(fields));
}

void export_for_inference(ComposerModel& model, const Batch& inputs, const std::string& path, ExportFormat format) {
  if (format == ExportFormat::SAFETENSORS) {
    NamedTensors tensors;
    for (const auto& p : model.named_parameters()) tensors.emplace_back(p.key(), p.value().detach());
    for (const auto& b : model.named_buffers()) tensors.emplace_back(b.key(), b.value().detach());
    write_to(path, [&] { write_safetensors(path, tensors, {{"format", "pt"}, {"source", "composer-cpp"}}); });
    return;
  }
  if (inputs.empty()) throw std::invalid_argument("export_for_inference: torchscript needs a sample input to trace");
  const bool was_training = model.is_training();
  model.eval();
  std::vector<char> bytes;
  try {
    at::NoGradGuard no_grad;
    bytes = traced_torchscript(model, inputs);
  } catch (...) {
    model.train(was_training);
    throw;
  }
  model.train(was_training);
  write_to(path, [&] { write_file_atomically(path, bytes); });
}

}  // namespace composer
