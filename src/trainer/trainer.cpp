#include "composer/trainer/trainer.h"

#include "composer/checkpoint/checkpoint_saver.h"
#include "composer/checkpoint/resume.h"
#include "composer/core/algorithm.h"
#include "composer/core/autocast.h"
#include "composer/dist/dist.h"
#include "composer/dist/env.h"
#include "composer/dist/parallelism_config.h"
#include "composer/dist/strategy.h"
#include "composer/loggers/console_logger.h"
#include "composer/loggers/progress_bar_logger.h"
#include "composer/metrics/metric.h"
#include "composer/models/composer_model.h"
#include "composer/nn/deferred_init.h"
#include "composer/optim/decoupled_sgdw.h"
#include "composer/optim/grad_scaler.h"
#include "composer/optim/optimizer.h"
#include "composer/optim/scheduler.h"
#include "composer/profiler/profiler.h"
#include "composer/utils/allocator.h"
#include "composer/utils/compat.h"
#include "composer/utils/cpu_block_cache.h"
#include "composer/utils/error_text.h"
#include "composer/utils/reproducibility.h"
#include "composer/utils/run_name.h"
#include "composer/utils/threads.h"
#include "composer/utils/type_name.h"
#include "composer/version.h"
#include "trainer/detail/bf16_probe.h"
#include "trainer/detail/trainer_impl.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <exception>
#include <random>
#include <regex>
#include <set>

namespace composer {
namespace detail {
namespace {

c10::Device resolve_device(const std::string& name) {
  if (name.empty()) {
    return torch::cuda::is_available() ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(dist::get_local_rank()))
                                       : c10::Device(c10::kCPU);
  }
  c10::Device d(c10::kCPU);
  try {
    d = c10::Device(name == "gpu" ? "cuda" : name);
  } catch (const c10::Error&) {
    throw std::invalid_argument("TrainerOptions.device '" + name + "' is not a device: expected cpu, cuda or cuda:N");
  }
  if (d.is_cuda() && !torch::cuda::is_available()) {
    throw std::invalid_argument("TrainerOptions.device '" + name +
                                "' needs CUDA, which this LibTorch build or machine lacks");
  }
  return d;
}

MetricMap filter_metrics(MetricMap all, const std::vector<std::string>& patterns) {
  if (patterns.empty()) return all;
  MetricMap kept;
  for (auto& [name, m] : all)
    for (const auto& p : patterns)
      if (std::regex_search(name, std::regex(canonical_metric_name(p)), std::regex_constants::match_continuous))
        kept[name] = m;
  return kept;
}

}  // namespace

TrainerImpl::TrainerImpl(TrainerOptions opts) : options(std::move(opts)), logger(state), engine(state, logger) {}

void TrainerImpl::hold_block_cache() {
  if (options.tune_allocator() && !block_cache) block_cache = hold_cpu_block_cache();
}

// Callbacks in Composer's order: user loggers, the progress bar / console logger, then user callbacks.
void install_callbacks(TrainerImpl& t) {
  const auto& o = t.options;
  std::vector<std::shared_ptr<LoggerDestination>> destinations = o.loggers();
  if (o.progress_bar()) destinations.push_back(std::make_shared<ProgressBarLogger>());
  if (o.log_to_console()) {
    destinations.push_back(
        std::make_shared<ConsoleLogger>(ConsoleLoggerOptions().log_interval(o.console_log_interval())));
  }
  for (auto& d : destinations) {
    t.state.callbacks.push_back(d);
    t.logger.add_destination(d);
  }
  for (auto& c : o.callbacks()) t.state.callbacks.push_back(c);
  if (!o.save().folder().empty()) t.state.callbacks.push_back(std::make_shared<CheckpointSaver>(o.save()));
  if (o.profiler()) {  // Composer's bind_to_state: its callbacks join the state's, and it sees every event
    std::cerr << "composer: the profiler is enabled; it adds overhead to training\n";
    for (auto& c : o.profiler()->bind_to_state(t.state)) t.state.callbacks.push_back(c);
    t.engine.set_observer(o.profiler().get());
  }
}

void setup_evaluation(TrainerImpl& t) {
  State& s = t.state;
  s.train_metrics = s.model->get_metrics(true);
  s.evaluators = t.options.evaluators();
  for (auto& e : s.evaluators) {
    if (s.eval_metrics.count(e.label)) throw std::invalid_argument("two evaluators share the label '" + e.label + "'");
    s.eval_metrics[e.label] = filter_metrics(s.model->get_metrics(false), e.metric_names);
  }
}

void setup_optimization(TrainerImpl& t) {
  State& s = t.state;
  if (!s.optimizer)
    s.optimizer = std::make_shared<optim::DecoupledSGDW>(s.model->parameters(), optim::DecoupledSGDWOptions(0.1));
  s.schedulers = t.options.schedulers();
  if (s.precision == Precision::AMP_FP16) s.scaler = std::make_shared<GradScaler>();
}

// The strategy's start (DDP: rank 0's weights everywhere and a gradient reducer); its data must be sharded.
void setup_strategy(TrainerImpl& t) {
  State& s = t.state;
  dist::Strategy& strategy = *s.strategy;
  if (strategy.needs_sharded_data() && s.train_dataloader && !s.train_dataloader->is_distributed()) {
    throw std::invalid_argument(
        "The world_size(" + std::to_string(strategy.num_replicas()) +
        ") > 1 but the training dataloader does not shard the data across ranks (" +
        std::to_string(strategy.data_parallel_size()) +
        " data-parallel ranks); build it with "
        "num_replicas = Strategy::data_parallel_size() and rank = data_parallel_rank() (the world size and this rank "
        "without tensor parallelism; DatasetLoaderOptions / TensorDataLoaderOptions)");
  }
  strategy.setup(*s.model, s.optimizer.get());
}

ResumeOptions resume_options(const TrainerOptions& o) {
  return ResumeOptions().load(o.load()).requested_run_name(o.run_name()).save(o.save());
}

// The loop units over the finished State, each with its part of the options.
void build_loops(TrainerImpl& t) {
  const TrainerOptions& o = t.options;
  t.train_step = std::make_unique<TrainStep>(t.state, t.engine, t.logger, o.train_step());
  t.eval_loop = std::make_unique<EvalLoop>(t.state, t.engine, t.logger, o.eval());
  t.epoch_loop =
      std::make_unique<TrainEpochLoop>(t.state, t.engine, t.logger, *t.train_step, *t.eval_loop, o.train_epoch());
  t.fit_loop = std::make_unique<FitLoop>(t.state, t.engine, t.logger, *t.epoch_loop, *t.eval_loop, o.fit());
  t.predict_loop = std::make_unique<PredictLoop>(t.state, t.engine, t.logger);
}

// Composer's seeding: an unset seed is drawn on rank 0 and broadcast; every rank seeds with rank_zero_seed + rank.
// Ranks that share a data-parallel place (a tensor-parallel group) share that rank's seed: they compute the same
// replicated activations, whose dropout masks must agree (torchtitan seeds an SPMD group alike, Megatron its
// tensor-parallel ranks). An unset run name is rank 0's too, so that all ranks write and find the same checkpoint
// files.
void agree_on_seed_and_run_name(TrainerImpl& t) {
  State& s = t.state;
  const TrainerOptions& o = t.options;
  const uint64_t drawn = o.seed().value_or(std::random_device{}() & 0xffffffffu);
  std::string name = resolve_run_name(o.run_name());
  at::Tensor seed = at::full({1}, static_cast<int64_t>(drawn), at::kLong);
  dist::broadcast(seed, 0);  // no-op for one process
  s.rank_zero_seed = static_cast<uint64_t>(seed.item<int64_t>());
  name = dist::all_gather_object(name).at(0);
  const bool shared = s.strategy->data_parallel_size() < dist::get_world_size();
  s.seed =
      s.rank_zero_seed + static_cast<uint64_t>(shared ? s.strategy->data_parallel_rank() : dist::get_global_rank());
  s.run_name = name;
}

// Composer's extract_hparams: the options' fields, then reprs for objects that have one, class names otherwise.
nlohmann::json options_hparams(const TrainerOptions& o) {
  nlohmann::json j = fields_json(o);
  const auto names = [](const auto& objects, auto&& text) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& obj : objects) list.push_back(text(*obj));
    return list;
  };
  j["model"] = class_name_of(*o.model());
  if (o.optimizer()) j["optimizer"] = class_name_of(*o.optimizer());
  j["algorithms"] = names(o.algorithms(), [](const Algorithm& a) { return a.repr(); });
  j["schedulers"] = names(o.schedulers(), [](const ComposerScheduler& s) { return s.repr(); });
  j["callbacks"] = names(o.callbacks(), [](const Callback& c) { return c.name(); });
  j["loggers"] = names(o.loggers(), [](const LoggerDestination& l) { return l.name(); });
  return j;
}

void log_run_hparams(TrainerImpl& t) {
  const State& s = t.state;
  t.logger.log_hyperparameters(
      {{"composer_version", COMPOSER_VERSION_STRING},
       {"torch_version", compat::torch_version()},
       {"run_name", s.run_name},
       {"rank_zero_seed", s.rank_zero_seed},
       {"num_nodes", dist::get_world_size() / std::max<int64_t>(1, dist::get_local_world_size())},
       {std::string("num_") + (s.device.is_cuda() ? "gpus" : "cpus") + "_per_node", dist::get_local_world_size()},
       {"device", s.device.str()},
       {"precision", to_string(s.precision)},
       {"num_threads", at::get_num_threads()}});
  if (t.options.auto_log_hparams()) t.logger.log_hyperparameters(options_hparams(t.options));
}

// The model on its device. A deferred one (nn::DeferredInit) is drawn now, whole, unless the strategy shards the
// state (FSDP), which draws it unit by unit as it shards it: then its deferred parameters are returned.
std::set<const c10::TensorImpl*> place_model(State& s) {
  if (!nn::has_deferred_parameters(*s.model)) {
    s.model->to(s.device);
    return {};
  }
  nn::to_device(*s.model, s.device);
  if (!s.strategy->shards_state()) nn::materialize(*s.model);
  std::set<const c10::TensorImpl*> deferred;
  for (const auto& p : s.model->parameters())
    if (nn::is_deferred(p)) deferred.insert(p.unsafeGetTensorImpl());
  return deferred;
}

// Surgery at INIT that replaced a deferred parameter read it before it had values (zeros): an error, not a model
// quietly built from zeros.
void check_deferred_kept(const torch::nn::Module& model, std::set<const c10::TensorImpl*> deferred) {
  for (const auto& p : model.parameters()) deferred.erase(p.unsafeGetTensorImpl());
  if (deferred.empty()) return;
  throw std::invalid_argument(
      "an algorithm replaced layers of a model whose initialization is deferred (nn::DeferredInit, init_device: "
      "meta) at INIT, before its weights were drawn (FSDP draws them when it shards the model); build the model "
      "without deferring, or without that algorithm");
}

}  // namespace detail

Trainer::Trainer(TrainerOptions options) : impl_(std::make_unique<detail::TrainerImpl>(std::move(options))) {
  auto& t = *impl_;
  const TrainerOptions& o = t.options;
  o.validate();
  State& s = t.state;
  configure_threads(o.num_threads());
  if (o.tune_allocator()) tune_allocator();
  s.device = detail::resolve_device(o.device());
  dist::initialize_dist(s.device, std::chrono::milliseconds(static_cast<int64_t>(o.dist_timeout() * 1000)));
  s.precision = o.precision().value_or(s.device.is_cuda() ? Precision::AMP_FP16 : Precision::FP32);
  s.strategy = dist::make_strategy(o.parallelism_config(), compute_dtype(s.precision));
  (void)PrecisionContext(s.precision, s.device);  // throws for a precision the device cannot run
  if (s.precision == Precision::AMP_BF16 && s.device.is_cpu() && dist::get_global_rank() == 0) {
    if (const auto warning = detail::bf16_warning(detail::measure_cpu_bf16_speed()))
      std::cerr << "composer: warning: " << *warning << "\n";
  }
  s.auto_microbatching = o.device_train_microbatch_size().is_auto;  // searched from the whole batch down
  s.device_train_microbatch_size = o.device_train_microbatch_size().value;
  s.device_train_microbatch_fraction = o.device_train_microbatch_size().fractional;
  detail::agree_on_seed_and_run_name(t);
  seed_all(s.seed);
  if (o.deterministic_mode()) at::globalContext().setDeterministicAlgorithms(true, false);
  s.model = o.model();
  const std::set<const c10::TensorImpl*> deferred = detail::place_model(s);
  s.algorithms = o.algorithms();
  s.optimizer = o.optimizer();  // before INIT, so surgery moves its parameters (the default one is built after)
  detail::install_callbacks(t);
  for (const auto& pass : o.algorithm_passes()) t.engine.register_pass(pass);
  t.engine.set_log_traces(o.log_traces());

  t.engine.run_event(Event::INIT);
  detail::check_deferred_kept(*s.model, deferred);

  detail::setup_evaluation(t);
  s.train_dataloader = o.train_dataloader();
  if (s.train_dataloader)
    s.set_dataloader(s.train_dataloader.get(), o.train_dataloader_label(), o.train_subset_num_batches());
  if (o.max_duration()) s.max_duration = *o.max_duration() * o.scale_schedule_ratio();
  s.iteration_length = o.iteration_length();
  if (s.max_duration && s.max_duration->value() <= 0) {
    throw std::invalid_argument("max_duration " + o.max_duration()->to_string() + " scaled by scale_schedule_ratio " +
                                std::to_string(o.scale_schedule_ratio()) + " is 0");
  }
  detail::setup_optimization(t);
  detail::log_run_hparams(t);
  // A sharded strategy (FSDP) splits the model and its (fresh) optimizer first, so that a checkpoint's whole state
  // loads onto the shards, from whatever world size saved it; DDP starts after the load, from rank 0's loaded weights.
  const bool shard_first = s.strategy->setup_before_load();
  if (shard_first) detail::setup_strategy(t);
  t.engine.run_event(Event::BEFORE_LOAD);
  const ResumePoint resumed = load_for_run(s, t.engine, detail::resume_options(o));
  t.engine.run_event(Event::AFTER_LOAD);
  seed_all(s.seed);
  if (!shard_first) detail::setup_strategy(t);
  detail::build_loops(t);
  t.fit_loop->resume_from(resumed);
}

Trainer::~Trainer() {
  try {
    close();
  } catch (const std::exception& e) {
    // While an error unwinds the stack, a failed closing barrier (the peer that died) only repeats that error.
    if (std::uncaught_exceptions() == 0)
      std::cerr << "composer: error while closing the trainer: " << brief_error(e) << "\n";
  }
}

void Trainer::fit() {
  auto& t = *impl_;
  State& s = t.state;
  if (!s.train_dataloader) throw std::invalid_argument("fit: no training data; set TrainerOptions.train_dataloader");
  if (!s.max_duration) throw std::invalid_argument("fit: max_duration is not set");
  if (s.max_duration->unit() == TimeUnit::ITERATION && !s.iteration_length) {
    throw std::invalid_argument("fit: max_duration " + s.max_duration->to_string() +
                                " is in iterations, which never end without TrainerOptions.iteration_length");
  }
  if (s.max_duration->unit() == TimeUnit::EPOCH && !s.train_dataloader->length()) {
    throw std::invalid_argument("fit: max_duration in epochs needs a dataloader with a length");
  }
  if (s.timestamp >= *s.max_duration) {
    throw std::invalid_argument("fit: max_duration " + s.max_duration->to_string() +
                                " is already reached; pass a duration to fit() to train longer");
  }
  t.hold_block_cache();
  t.fit_loop->run();
}

void Trainer::fit(const Time& duration, bool reset_time) {
  State& s = impl_->state;
  if (duration.unit() == TimeUnit::DURATION || duration.unit() == TimeUnit::SECOND) {
    throw std::invalid_argument("fit: duration '" + duration.to_string() + "' must be in ep, ba, sp, tok or iter");
  }
  if (reset_time) {
    s.timestamp = Timestamp();
    s.previous_timestamp.reset();
  }
  s.max_duration = duration + s.timestamp.get(duration.unit());
  fit();
}

void Trainer::eval() {
  auto& t = *impl_;
  if (t.state.evaluators.empty()) throw std::invalid_argument("eval: no evaluators; set TrainerOptions.evaluators");
  t.hold_block_cache();
  t.engine.run_event(Event::EVAL_STANDALONE_START);
  for (auto& e : t.state.evaluators) t.eval_loop->run(e);
  t.engine.run_event(Event::EVAL_STANDALONE_END);
}

std::vector<at::Tensor> Trainer::predict(DataLoader& loader, int64_t subset_num_batches) {
  impl_->hold_block_cache();
  return impl_->predict_loop->run(loader, PredictLoopOptions().subset_num_batches(subset_num_batches));
}

void Trainer::close() {
  if (!impl_ || impl_->engine.closed()) return;
  impl_->engine.close();
  impl_->block_cache.reset();  // the cached blocks go back to the OS (unless another Trainer holds the cache)
  dist::barrier();             // Composer: close() ends with a barrier so no rank exits while others still save
}

State& Trainer::state() { return impl_->state; }
Logger& Trainer::logger() { return impl_->logger; }
Engine& Trainer::engine() { return impl_->engine; }

}  // namespace composer
