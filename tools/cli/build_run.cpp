#include "cli/build_run.h"

#include "cli/build_from.h"
#include "cli/build_parallelism.h"
#include "composer/callbacks/registry.h"
#include "composer/composer.h"
#include "composer/loggers/registry.h"
#include "composer/models/registry.h"
#include "composer/optim/registry.h"
#include "composer/profiler/json_trace_handler.h"
#include "composer/profiler/profiler.h"
#include "composer/profiler/registry.h"

#include <torch/torch.h>

namespace composer::cli {
namespace {

template <class F>
auto guard(const std::string& path, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const ConfigError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw ConfigError(path + ": " + e.what());
  }
}

// An error from reading a section's fields, under the section's path unless it already names it ("profiler.x: ...").
ConfigError section_error(const ConfigNode& n, const std::invalid_argument& e) {
  const std::string what = e.what();
  return ConfigError(what.rfind(n.path(), 0) == 0 ? what : n.path() + ": " + what);
}

// The image shapes the data gives against what the model takes, checked here so that a mismatch names the config
// keys instead of surfacing as a matmul error in the first forward.
void check_model_fits_images(const ConfigNode& n, const std::string& name, const DataSpec& data) {
  if (data.image_size <= 0 || data.language) return;
  const std::string shape =
      std::to_string(data.channels) + "x" + std::to_string(data.image_size) + "x" + std::to_string(data.image_size);
  if (n.has("in_channels") && n.get_int("in_channels", 0) != data.channels) {
    throw ConfigError(n.key_path("in_channels") + ": " + std::to_string(n.get_int("in_channels", 0)) +
                      ", but the data gives " + shape + " images (" + std::to_string(data.channels) + " channels)");
  }
  if (name == "mlp") {
    const int64_t features = data.channels * data.image_size * data.image_size;
    if (n.has("in_features") && n.get_int("in_features", 0) != features) {
      throw ConfigError(n.key_path("in_features") + ": " + std::to_string(n.get_int("in_features", 784)) +
                        ", but the data gives " + shape + " images = " + std::to_string(features) + " features");
    }
  }
  if (name == "mnist_cnn" && (data.image_size < 28 || data.image_size > 31)) {
    throw ConfigError(n.key_path("name") +
                      ": mnist_cnn takes 28x28 images (two 2x2 poolings to 7x7), but the data gives " + shape);
  }
}

// The model's shape defaults follow the data (models::ModelInputs); explicit keys that contradict it are errors here.
// llm-foundry's init_device: "meta" builds the model under nn::DeferredInit (no weights until the Trainer draws
// them: unit by unit, each sharded as it is drawn, under FSDP); "cpu", the default, builds it whole.
bool deferred_init(const ConfigNode& n) {
  const std::string device = n.get_string("init_device", "cpu");
  if (device != "cpu" && device != "meta") {
    throw ConfigError(n.key_path("init_device") + ": '" + device +
                      "'; expected cpu (build the weights now) or meta (draw them when training starts, unit by unit "
                      "under FSDP)");
  }
  return device == "meta";
}

// The section without `key`, which the CLI reads itself (not a hyperparameter of the registry's entry).
ConfigNode without_key(const ConfigNode& n, const std::string& key) {
  YAML::Node y = YAML::Clone(n.yaml());
  if (y.IsMap()) y.remove(key);
  return ConfigNode(y, n.path());
}

std::shared_ptr<ComposerModel> model_from(const ConfigNode& n, const DataSpec& data) {
  const std::string name = n.require_string("name");
  const ConfigNode keys = without_key(n, "init_device");
  if (models::model_registry().find(name)) check_model_fits_images(keys, name, data);
  models::ModelInputs inputs;
  if (!data.language) {
    inputs.channels = data.channels;
    inputs.image_size = data.image_size;
  }
  inputs.num_classes = data.num_classes;
  inputs.vocab_size = data.vocab_size;
  std::shared_ptr<ComposerModel> model;
  if (deferred_init(n)) {
    nn::DeferredInit deferred;
    try {
      model = build_from(models::model_registry(), keys, name, "name", inputs);
    } catch (const c10::Error&) {  // a deferred parameter written directly (not through nn::initialize)
      throw ConfigError(n.key_path("init_device") + ": meta: model '" + name +
                        "' writes its parameters directly while it is built, which a deferred build cannot record; "
                        "use init_device: cpu");
    }
  } else {
    model = build_from(models::model_registry(), keys, name, "name", inputs);
  }
  // A language model carries its data's tokenizer, as Composer's HuggingFaceModel does (the Generate callback), unless
  // it came with its own (a pretrained model's).
  if (auto* lm = dynamic_cast<ComposerLanguageModel*>(model.get()); lm && data.tokenizer && !lm->tokenizer())
    lm->set_tokenizer(data.tokenizer);
  return model;
}

// The optimizer over the parameters that train (a LoRA model's adapters; every parameter otherwise).
std::shared_ptr<torch::optim::Optimizer> build_optimizer(const ConfigNode& n, ComposerModel& model) {
  std::vector<at::Tensor> trainable;
  for (const auto& p : model.parameters())
    if (p.requires_grad()) trainable.push_back(p);
  if (trainable.empty()) throw ConfigError(n.path() + ": the model has no trainable parameter");
  return build_from(optim::optimizer_registry(), n, n.get_string("name", "decoupled_sgdw"), "name", trainable);
}

std::shared_ptr<ComposerScheduler> build_scheduler(const ConfigNode& n) {
  return build_from(optim::scheduler_registry(), n, n.require_string("name"), "name");
}

std::shared_ptr<Algorithm> build_algorithm(const ConfigNode& n) {
  return build_from(algorithms::algorithm_registry(), n, n.require_string("name"), "name");
}

std::shared_ptr<Callback> build_callback(const ConfigNode& n) {
  return build_from(callbacks::callback_registry(), n, n.require_string("name"), "name");
}

// The CLI keeps its runs in runs/: a file logger without a filename writes runs/{run_name}/logs-rank{rank}.jsonl.
std::shared_ptr<LoggerDestination> build_logger(const ConfigNode& n, RunSpec& spec) {
  const std::string name = n.require_string("name");
  YAML::Node node = YAML::Clone(n.yaml());
  if (name == "file" && !node["filename"]) node["filename"] = "runs/{run_name}/logs-rank{rank}.jsonl";
  if (name == "file") spec.log_file_patterns.push_back(node["filename"].as<std::string>());
  return build_from(loggers::logger_registry(), ConfigNode(node, n.path()), name, "name");
}

// The profiler section: Composer's Profiler arguments (schedule: {skip_first, wait, warmup, active, repeat},
// sys_prof_*, torch_prof_*) and trace_handlers (a list of {name: json, ...}; absent: one JSON trace handler with its
// defaults).
std::shared_ptr<Profiler> build_profiler(const ConfigNode& n) {
  std::vector<std::shared_ptr<TraceHandler>> handlers;
  if (n.has("trace_handlers")) {
    for (const auto& h : n.children("trace_handlers")) {
      handlers.push_back(build_from(profiler::trace_handler_registry(), h, h.require_string("name"), "name"));
    }
  } else {
    handlers.push_back(std::make_shared<JsonTraceHandler>());
  }
  YAML::Node rest = YAML::Clone(n.yaml());
  rest.remove("trace_handlers");
  try {
    Hparams h(hparams_of(ConfigNode(rest, n.path()), ""), n.path());
    return std::make_shared<Profiler>(handlers, read_options(h, ProfilerOptions()));
  } catch (const std::invalid_argument& e) {
    throw section_error(n, e);
  }
}

// The keys that hold objects; every other top-level key is a field of TrainerOptions.
const std::vector<std::string> kObjectKeys{"model",      "train_data",         "eval_data",   "optimizer",
                                           "schedulers", "algorithms",         "callbacks",   "loggers",
                                           "profiler",   "parallelism_config", "object_store"};

// object_store: {timeout, num_attempts, endpoint_url, ...}: the options of every object store the run makes.
void apply_object_store_options(const ConfigNode& n) {
  try {
    Hparams h(hparams_of(n, ""), n.path());
    set_default_object_store_options(read_options(h, ObjectStoreOptions()));  // validates
  } catch (const std::invalid_argument& e) {
    throw section_error(n, e);
  }
}

void check_top_level_keys(const ConfigNode& root) {
  std::vector<std::string> allowed = kObjectKeys;
  for (const auto& f : describe_fields(TrainerOptions(nullptr))) allowed.push_back(f.name);
  root.expect_keys(allowed);
}

// The top-level scalars (and lists of scalars) as TrainerOptions' hyperparameters.
std::map<std::string, std::string> trainer_hparams(const ConfigNode& root) {
  YAML::Node scalars(YAML::NodeType::Map);
  for (const auto& kv : root.yaml()) {
    const std::string key = kv.first.as<std::string>();
    if (std::find(kObjectKeys.begin(), kObjectKeys.end(), key) == kObjectKeys.end()) scalars[key] = kv.second;
  }
  return hparams_of(ConfigNode(scalars, ""), "");
}

// The training data's split (num_replicas, rank): by the strategy's data-parallel ranks (a tensor-parallel group's
// ranks read the same batches); {-1, -1}, every rank its own part, without a tp section.
std::pair<int64_t, int64_t> data_parallel_place(const std::optional<dist::ParallelismConfig>& config) {
  if (!config || !config->tp()) return {-1, -1};
  return guard("parallelism_config", [&] {
    const auto strategy = dist::make_strategy(*config, at::kFloat);
    return std::make_pair(strategy->data_parallel_size(), strategy->data_parallel_rank());
  });
}

}  // namespace

RunSpec build_run(const YAML::Node& root_yaml, bool need_train_data) {
  const ConfigNode root(root_yaml, "");
  check_top_level_keys(root);
  RunSpec spec;
  const auto seed = static_cast<uint64_t>(ConfigNode::positive(root.get_int("seed", 42), "seed", /*allow_zero=*/true));
  seed_all(seed);  // before the model is built: the same seed gives the same initial weights
  set_default_object_store_options(ObjectStoreOptions());
  if (root.has("object_store")) apply_object_store_options(root.child("object_store"));
  if (!root.has("model")) throw ConfigError("model: required (a mapping with a 'name')");
  std::optional<dist::ParallelismConfig> parallelism;
  if (root.has("parallelism_config"))
    parallelism = guard("parallelism_config", [&] { return build_parallelism(root.child("parallelism_config")); });
  if (root.has("train_data")) {
    spec.train = build_data(root.child("train_data"), /*train=*/true, seed, data_parallel_place(parallelism));
  } else if (need_train_data) {
    throw ConfigError("train_data: required to train (a mapping with a 'dataset')");
  }
  if (root.has("eval_data")) spec.eval = build_data(root.child("eval_data"), /*train=*/false, seed);
  const DataSpec& shape_source = spec.train.loader ? spec.train : spec.eval;
  auto model = model_from(root.child("model"), shape_source);
  spec.options = std::make_unique<TrainerOptions>(model);
  TrainerOptions& o = *spec.options;
  o.seed(seed);
  try {
    Hparams h(trainer_hparams(root), "");
    o = read_options(h, o);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());  // "<key>: ..."
  }
  o.train_dataloader(spec.train.loader);
  if (spec.eval.loader) o.eval_dataloader(spec.eval.loader);
  if (need_train_data && !o.max_duration())
    throw ConfigError("max_duration: required to train (e.g. '2ep' or '500ba')");
  o.optimizer(build_optimizer(root.child("optimizer"), *model));
  std::vector<std::shared_ptr<ComposerScheduler>> schedulers;
  for (const auto& s : root.children("schedulers")) schedulers.push_back(build_scheduler(s));
  o.schedulers(schedulers);
  std::vector<std::shared_ptr<Algorithm>> algorithms;
  for (const auto& a : root.children("algorithms")) algorithms.push_back(build_algorithm(a));
  o.algorithms(algorithms);
  std::vector<std::shared_ptr<Callback>> callbacks;
  for (const auto& c : root.children("callbacks")) callbacks.push_back(build_callback(c));
  o.callbacks(callbacks);
  std::vector<std::shared_ptr<LoggerDestination>> loggers;
  for (const auto& l : root.children("loggers")) loggers.push_back(build_logger(l, spec));
  o.loggers(loggers);
  if (root.has("profiler")) o.profiler(build_profiler(root.child("profiler")));
  if (parallelism) o.parallelism_config(*parallelism);
  if (o.save_folder().empty() && (o.autoresume() || root.has("save_interval"))) {
    throw ConfigError(std::string(o.autoresume() ? "autoresume" : "save_interval") + ": needs save_folder");
  }
  guard("config", [&] {
    o.validate();
    return 0;
  });
  return spec;
}

std::shared_ptr<ComposerModel> build_model(const ConfigNode& node, const DataSpec& data) {
  return model_from(node, data);
}

}  // namespace composer::cli
