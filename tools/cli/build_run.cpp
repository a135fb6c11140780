#include "cli/build_run.h"

#include "cli/registry.h"
#include "composer/composer.h"

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

std::shared_ptr<ComposerModel> build_model(const ConfigNode& n, const DataSpec& data) {
  n.expect_keys({"name", "in_features", "hidden", "num_classes", "in_channels", "width", "depth", "vocab_size",
                 "max_seq_len", "n_layer", "n_head", "d_model", "d_ff", "dropout"});
  const std::string name = n.require_string("name");
  require_registered("models", name, n.key_path("name"));
  const int64_t classes = n.get_int("num_classes", data.num_classes > 0 ? data.num_classes : 10);
  const int64_t channels = n.get_int("in_channels", data.channels > 0 ? data.channels : 3);
  check_model_fits_images(n, name, data);
  return guard(n.path(), [&]() -> std::shared_ptr<ComposerModel> {
    const int64_t features = data.image_size > 0 ? data.channels * data.image_size * data.image_size : 784;
    if (name == "mlp")
      return ComposerClassifier::wrap(
          models::mlp(n.get_int("in_features", features), n.get_ints("hidden", {256, 256}), classes));
    if (name == "mnist_cnn")
      return ComposerClassifier::wrap(models::mnist_cnn(n.get_int("in_channels", 1), classes, n.get_int("width", 32)));
    if (name == "cifar_resnet")
      return ComposerClassifier::wrap(models::cifar_resnet(n.get_int("depth", 20), classes, channels));
    if (name == "resnet")
      return ComposerClassifier::wrap(models::resnet(n.get_int("depth", 50), n.get_int("num_classes", 1000), channels));
    models::TransformerConfig c;
    c.vocab_size(n.get_int("vocab_size", data.vocab_size > 0 ? data.vocab_size : 50257))
        .max_seq_len(n.get_int("max_seq_len", 1024))
        .n_layer(n.get_int("n_layer", 12))
        .n_head(n.get_int("n_head", 12))
        .d_model(n.get_int("d_model", 768))
        .d_ff(n.get_int("d_ff", 0))
        .dropout(n.get_double("dropout", 0.0));
    if (name == "gpt") return std::make_shared<ComposerLanguageModel>(std::make_shared<models::GPT>(c));
    return std::make_shared<ComposerLanguageModel>(std::make_shared<models::BertMLM>(c), /*masked=*/true);
  });
}

std::shared_ptr<torch::optim::Optimizer> build_optimizer(const ConfigNode& n, ComposerModel& model) {
  n.expect_keys({"name", "lr", "momentum", "dampening", "weight_decay", "nesterov", "betas", "eps", "amsgrad"});
  const std::string name = n.get_string("name", "decoupled_sgdw");
  require_registered("optimizers", name, n.key_path("name"));
  const auto params = model.parameters();
  const std::vector<double> betas = n.get_doubles("betas", {0.9, name == "decoupled_adamw" ? 0.95 : 0.999});
  if (betas.size() != 2) throw ConfigError(n.key_path("betas") + ": expected two numbers");
  return guard(n.path(), [&]() -> std::shared_ptr<torch::optim::Optimizer> {
    if (name == "decoupled_sgdw") {
      return std::make_shared<optim::DecoupledSGDW>(params, optim::DecoupledSGDWOptions(n.get_double("lr", 0.1))
                                                                .momentum(n.get_double("momentum", 0.0))
                                                                .dampening(n.get_double("dampening", 0.0))
                                                                .weight_decay(n.get_double("weight_decay", 0.0))
                                                                .nesterov(n.get_bool("nesterov", false)));
    }
    if (name == "decoupled_adamw") {
      return std::make_shared<optim::DecoupledAdamW>(params, optim::DecoupledAdamWOptions(n.get_double("lr", 1e-3))
                                                                 .beta1(betas[0])
                                                                 .beta2(betas[1])
                                                                 .eps(n.get_double("eps", 1e-8))
                                                                 .weight_decay(n.get_double("weight_decay", 1e-5))
                                                                 .amsgrad(n.get_bool("amsgrad", false)));
    }
    if (name == "sgd") {
      return std::make_shared<torch::optim::SGD>(params, torch::optim::SGDOptions(n.get_double("lr", 0.1))
                                                             .momentum(n.get_double("momentum", 0.0))
                                                             .dampening(n.get_double("dampening", 0.0))
                                                             .weight_decay(n.get_double("weight_decay", 0.0))
                                                             .nesterov(n.get_bool("nesterov", false)));
    }
    if (name == "adam") {
      return std::make_shared<torch::optim::Adam>(params, torch::optim::AdamOptions(n.get_double("lr", 1e-3))
                                                              .betas({betas[0], betas[1]})
                                                              .eps(n.get_double("eps", 1e-8))
                                                              .weight_decay(n.get_double("weight_decay", 0.0)));
    }
    return std::make_shared<torch::optim::AdamW>(params, torch::optim::AdamWOptions(n.get_double("lr", 1e-3))
                                                             .betas({betas[0], betas[1]})
                                                             .eps(n.get_double("eps", 1e-8))
                                                             .weight_decay(n.get_double("weight_decay", 1e-2)));
  });
}

std::shared_ptr<ComposerScheduler> build_scheduler(const ConfigNode& n) {
  n.expect_keys({"name", "t_max", "t_warmup", "alpha", "alpha_i", "alpha_f", "step_size", "gamma", "milestones",
                 "decay_period", "t_0", "t_mult", "power", "scale_warmup"});
  const std::string name = n.require_string("name");
  require_registered("schedulers", name, n.key_path("name"));
  const Time one_dur = Time::from_duration(1.0);
  const Time t_max = n.get_time("t_max", TimeUnit::EPOCH).value_or(one_dur);
  auto required = [&](const std::string& key) {
    auto t = n.get_time(key, TimeUnit::EPOCH);
    if (!t) throw ConfigError(n.key_path(key) + ": required for scheduler '" + name + "' (a time such as '100ba')");
    return *t;
  };
  const bool scale = n.get_bool("scale_warmup", false);
  if (name == "constant") return std::make_shared<ConstantScheduler>(n.get_double("alpha", 1.0), t_max);
  if (name == "linear")
    return std::make_shared<LinearScheduler>(n.get_double("alpha_i", 1.0), n.get_double("alpha_f", 0.0), t_max);
  if (name == "step") return std::make_shared<StepScheduler>(required("step_size"), n.get_double("gamma", 0.1));
  if (name == "multistep")
    return std::make_shared<MultiStepScheduler>(n.get_times("milestones", TimeUnit::EPOCH), n.get_double("gamma", 0.1));
  if (name == "exponential") {
    return std::make_shared<ExponentialScheduler>(
        n.get_double("gamma", 0.9), n.get_time("decay_period", TimeUnit::EPOCH).value_or(Time::from_epoch(1)));
  }
  if (name == "cosine_annealing")
    return std::make_shared<CosineAnnealingScheduler>(t_max, n.get_double("alpha_f", 0.0));
  if (name == "cosine_annealing_warm_restarts") {
    return std::make_shared<CosineAnnealingWarmRestartsScheduler>(required("t_0"), n.get_double("t_mult", 1.0),
                                                                  n.get_double("alpha_f", 0.0));
  }
  if (name == "polynomial")
    return std::make_shared<PolynomialScheduler>(n.get_double("power", 2.0), t_max, n.get_double("alpha_f", 0.0));
  if (name == "constant_with_warmup")
    return std::make_shared<ConstantWithWarmupScheduler>(required("t_warmup"), n.get_double("alpha", 1.0), t_max,
                                                         scale);
  if (name == "linear_with_warmup") {
    return std::make_shared<LinearWithWarmupScheduler>(required("t_warmup"), n.get_double("alpha_i", 1.0),
                                                       n.get_double("alpha_f", 0.0), t_max, scale);
  }
  if (name == "cosine_annealing_with_warmup") {
    return std::make_shared<CosineAnnealingWithWarmupScheduler>(required("t_warmup"), t_max,
                                                                n.get_double("alpha_f", 0.0), scale);
  }
  if (name == "polynomial_with_warmup") {
    return std::make_shared<PolynomialWithWarmupScheduler>(required("t_warmup"), n.get_double("power", 2.0), t_max,
                                                           n.get_double("alpha_f", 0.0), scale);
  }
  return std::make_shared<MultiStepWithWarmupScheduler>(
      required("t_warmup"), n.get_times("milestones", TimeUnit::EPOCH), n.get_double("gamma", 0.1), scale);
}

// `- name: blurpool` plus the algorithm's hyperparameters as scalars; the registry checks names and values.
std::shared_ptr<Algorithm> build_algorithm(const ConfigNode& n) {
  const std::string name = n.require_string("name");
  if (!algorithms::find_algorithm(name)) require_registered("algorithms", name, n.key_path("name"));  // throws
  std::map<std::string, std::string> hparams;
  for (const auto& kv : n.yaml()) {
    const std::string key = kv.first.as<std::string>();
    if (key == "name") continue;
    if (!kv.second.IsScalar()) throw ConfigError(n.key_path(key) + ": expected a scalar value");
    hparams[key] = kv.second.Scalar();
  }
  try {
    return algorithms::make_algorithm(name, hparams, n.path());
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
}

std::shared_ptr<Callback> build_callback(const ConfigNode& n) {
  n.expect_keys({"name", "window_size", "time_unit", "monitor", "dataloader_label", "threshold", "stop_on_batch"});
  const std::string name = n.require_string("name");
  require_registered("callbacks", name, n.key_path("name"));
  if (name == "speed_monitor") {
    return guard(n.path(), [&] {
      return std::make_shared<SpeedMonitor>(n.get_int("window_size", 100), n.get_string("time_unit", "hours"));
    });
  }
  if (name == "threshold_stopper") {
    if (!n.has("threshold")) throw ConfigError(n.key_path("threshold") + ": required (a number)");
    return guard(n.path(), [&] {
      return std::make_shared<ThresholdStopper>(
          n.get_string("monitor", "Accuracy"), n.get_string("dataloader_label", "eval"), n.get_double("threshold", 0.0),
          nullptr, n.get_bool("stop_on_batch", false));
    });
  }
  return std::make_shared<LRMonitor>();
}

std::shared_ptr<LoggerDestination> build_logger(const ConfigNode& n, RunSpec& spec) {
  n.expect_keys({"name", "filename", "flush_interval", "overwrite", "log_interval"});
  const std::string name = n.require_string("name");
  require_registered("loggers", name, n.key_path("name"));
  return guard(n.path(), [&]() -> std::shared_ptr<LoggerDestination> {
    if (name == "file") {
      const std::string filename = n.get_string("filename", "runs/{run_name}/logs-rank{rank}.jsonl");
      spec.log_file_patterns.push_back(filename);
      return std::make_shared<FileLogger>(FileLoggerOptions()
                                              .filename(filename)
                                              .flush_interval(n.get_int("flush_interval", 100))
                                              .overwrite(n.get_bool("overwrite", false)));
    }
    return std::make_shared<ConsoleLogger>(
        ConsoleLoggerOptions().log_interval(n.get_time("log_interval", TimeUnit::BATCH).value_or(Time::from_batch(1))));
  });
}

}  // namespace

RunSpec build_run(const YAML::Node& root_yaml, bool need_train_data) {
  const ConfigNode root(root_yaml, "");
  root.expect_keys({"run_name",
                    "seed",
                    "model",
                    "train_data",
                    "eval_data",
                    "optimizer",
                    "schedulers",
                    "algorithms",
                    "callbacks",
                    "loggers",
                    "max_duration",
                    "iteration_length",
                    "eval_interval",
                    "eval_subset_num_batches",
                    "train_subset_num_batches",
                    "precision",
                    "device",
                    "device_train_microbatch_size",
                    "scale_schedule_ratio",
                    "step_schedulers_every_batch",
                    "progress_bar",
                    "log_to_console",
                    "console_log_interval",
                    "deterministic_mode",
                    "num_threads",
                    "save_folder",
                    "save_filename",
                    "save_latest_filename",
                    "save_interval",
                    "save_overwrite",
                    "save_weights_only",
                    "save_num_checkpoints_to_keep",
                    "load_path",
                    "load_weights_only",
                    "load_strict_model_weights",
                    "load_ignore_keys",
                    "autoresume"});
  RunSpec spec;
  const auto seed = static_cast<uint64_t>(ConfigNode::positive(root.get_int("seed", 42), "seed", /*allow_zero=*/true));
  seed_all(seed);  // before the model is built: the same seed gives the same initial weights
  if (!root.has("model")) throw ConfigError("model: required (a mapping with a 'name')");
  if (root.has("train_data")) {
    spec.train = build_data(root.child("train_data"), /*train=*/true, seed);
  } else if (need_train_data) {
    throw ConfigError("train_data: required to train (a mapping with a 'dataset')");
  }
  if (root.has("eval_data")) spec.eval = build_data(root.child("eval_data"), /*train=*/false, seed);
  const DataSpec& shape_source = spec.train.loader ? spec.train : spec.eval;
  auto model = build_model(root.child("model"), shape_source);
  spec.options = std::make_unique<TrainerOptions>(model);
  TrainerOptions& o = *spec.options;
  o.seed(seed).run_name(root.get_string("run_name", "")).train_dataloader(spec.train.loader);
  if (spec.eval.loader) o.eval_dataloader(spec.eval.loader);
  if (auto d = root.get_time("max_duration", TimeUnit::EPOCH)) o.max_duration(*d);
  if (auto il = root.get_time("iteration_length", TimeUnit::EPOCH)) o.iteration_length(*il);
  if (need_train_data && !o.max_duration())
    throw ConfigError("max_duration: required to train (e.g. '2ep' or '500ba')");
  if (auto e = root.get_time("eval_interval", TimeUnit::EPOCH)) o.eval_interval(*e);
  if (auto c = root.get_time("console_log_interval", TimeUnit::BATCH)) o.console_log_interval(*c);
  o.eval_subset_num_batches(root.get_int("eval_subset_num_batches", -1))
      .train_subset_num_batches(root.get_int("train_subset_num_batches", -1))
      .device(root.get_string("device", ""))
      .scale_schedule_ratio(root.get_double("scale_schedule_ratio", 1.0))
      .step_schedulers_every_batch(root.get_bool("step_schedulers_every_batch", true))
      .progress_bar(root.get_bool("progress_bar", true))
      .log_to_console(root.get_bool("log_to_console", false))
      .deterministic_mode(root.get_bool("deterministic_mode", false))
      .num_threads(static_cast<int>(root.get_int("num_threads", 0)));
  if (root.has("precision"))
    o.precision(guard("precision", [&] { return parse_precision(root.get_string("precision", "")); }));
  if (root.has("device_train_microbatch_size")) {
    o.device_train_microbatch_size(guard("device_train_microbatch_size", [&] {
      return MicrobatchSize::parse(root.get_string("device_train_microbatch_size", ""));
    }));
  }
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
  o.save_folder(root.get_string("save_folder", ""))
      .save_filename(root.get_string("save_filename", o.save_filename()))
      .save_latest_filename(root.get_string("save_latest_filename", o.save_latest_filename()))
      .save_overwrite(root.get_bool("save_overwrite", false))
      .save_weights_only(root.get_bool("save_weights_only", false))
      .save_num_checkpoints_to_keep(root.get_int("save_num_checkpoints_to_keep", -1))
      .load_path(root.get_string("load_path", ""))
      .load_weights_only(root.get_bool("load_weights_only", false))
      .load_strict_model_weights(root.get_bool("load_strict_model_weights", true))
      .autoresume(root.get_bool("autoresume", false));
  if (auto si = root.get_time("save_interval", TimeUnit::EPOCH)) o.save_interval(*si);
  if (root.has("load_ignore_keys")) {
    const YAML::Node keys = root.yaml()["load_ignore_keys"];
    if (!keys.IsSequence()) throw ConfigError("load_ignore_keys: expected a list of glob patterns");
    std::vector<std::string> globs;
    for (const auto& k : keys) globs.push_back(k.as<std::string>());
    o.load_ignore_keys(globs);
  }
  if (o.save_folder().empty() && (o.autoresume() || root.has("save_interval"))) {
    throw ConfigError(std::string(o.autoresume() ? "autoresume" : "save_interval") + ": needs save_folder");
  }
  guard("config", [&] {
    o.validate();
    return 0;
  });
  return spec;
}

}  // namespace composer::cli
