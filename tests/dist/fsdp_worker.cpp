// A rank for the FSDP tests: float64 training of a small classifier whose parameter sizes do not divide by 2, 3 or 4
// (Linear 7->31, Tanh, Linear 31->5: 217, 31, 155 and 5 elements), each Linear a sharding unit, weights and biases in
// two optimizer groups (no weight decay on biases).
// Usage: fsdp_worker OUT STRATEGY OPTIMIZER MICROBATCH [CLIP]
//   STRATEGY: ddp (the default strategy: one process or DDP), FULL_SHARD, SHARD_GRAD_OP or NO_SHARD
//   OPTIMIZER: adamw (DecoupledAdamW) or sgdw (DecoupledSGDW with momentum)
//   MICROBATCH: device_train_microbatch_size (0: the whole batch)
//   CLIP: TYPE:THRESHOLD for GradientClipping
// 6 steps of 24 samples in all (24 / world size per rank). Rank 0 writes the final full weights to OUT; every rank
// under FSDP prints "shard_bytes B" (its parameters' shards), "full_bytes B" (a replica's) and "units N"; rank 0
// prints "loss L" and "eval NAME VALUE" for each metric of the evaluation at the end of fit (240 samples, split over
// the ranks).
// Checkpoints, from the environment: FSDP_WORKER_SAVE=DIR saves every 3 batches into DIR (run name "fsdp");
// FSDP_WORKER_LOAD=PATH loads PATH before training; FSDP_WORKER_RESAVE=PATH only loads (FSDP_WORKER_LOAD), then
// writes the loaded state again to PATH as a full checkpoint (every rank gathers, rank 0 writes) and stops;
// FSDP_WORKER_SHARDED=1 saves sharded checkpoints (state_dict_type sharded: a directory per checkpoint);
// FSDP_WORKER_AUTORESUME=1 turns autoresume on (with FSDP_WORKER_SAVE); FSDP_WORKER_KEEP=N keeps the newest N
// checkpoints (save_num_checkpoints_to_keep); DIR may be an object-store URI; FSDP_WORKER_RANK0_ONLY=1 sets
// load_monolith_rank0_only and gives ranks other than 0 a load path that does not exist; FSDP_WORKER_ONE_UNIT=1 makes
// the whole model one sharding unit (auto_wrap off: each flat buffer then holds both weights, or both biases);
// FSDP_WORKER_ACTIVATION_CHECKPOINTING=1 builds the same network (the same weights) from composer::nn layers and
// turns activation_checkpointing on (each Linear unit recomputed in the backward, the first one on an input that needs
// no gradient; "offload" also sets activation_cpu_offload); FSDP_WORKER_NN_LAYERS=1 builds it from composer::nn layers
// without checkpointing (either way each Linear unit is gathered around its own forward and backward);
// FSDP_WORKER_BACKWARD_PREFETCH=PRE|POST|NONE and FSDP_WORKER_FORWARD_PREFETCH=1 set the prefetch options;
// FSDP_WORKER_MIXED_PRECISION (below) sets mixed_precision; FSDP_WORKER_REPLICATE=R sets data_parallel_replicate_degree
// (HYBRID_SHARD over R shard groups); FSDP_WORKER_GRAD_NORMS=1 adds an OptimizerMonitor at every batch and rank 0
// prints "monitored KEY VALUE" for each l2_norm key of the last batch (gradients, and the optimizer's moment, param and
// update norms). Under FSDP every rank also prints "per_unit
// N" (units gathered on their own), "peak_gathered B" (the most gathered parameter bytes at once in training passes),
// "strategy NAME" (the one in effect) and "mesh R S" (replicas, shard group size). FSDP_WORKER_ALGORITHM=ema adds EMA
// (smoothing 0.6 every batch; rank 0 also writes EMA's averaged weights, whole, to OUT.ema), =sam adds SAM (rho 0.05),
// =swa adds SWA (averaging every batch from 0.3dur, the average loaded into the model at 0.99dur: after batch 6).
// FSDP_WORKER_FREEZE freezes parameters (requires_grad false; still in the optimizer's groups): "bias" both biases,
// "first" the first Linear, "last" the second one.
#include "support/clipping_spec.h"
#include "support/worker_outputs.h"

#include "composer/composer.h"

#include <torch/serialize.h>
#include <torch/torch.h>

#include <iomanip>
#include <iostream>

using namespace composer;

namespace {

struct Tanh : nn::Layer {
  at::Tensor forward(const at::Tensor& x) override { return at::tanh(x); }
};

// `net`'s Linear-Tanh-Linear as composer::nn layers holding the same weights.
std::shared_ptr<nn::Sequential> as_nn_layers(torch::nn::Sequential& net) {
  auto seq = std::make_shared<nn::Sequential>();
  for (const auto& m : net->children()) {
    if (auto* l = m->as<torch::nn::Linear>()) {
      auto linear = std::make_shared<nn::Linear>(l->options.in_features(), l->options.out_features());
      linear->to(at::kDouble);
      torch::NoGradGuard no_grad;
      linear->weight.copy_(l->weight);
      linear->bias.copy_(l->bias);
      seq->push_back(linear);
    } else {
      seq->push_back(std::make_shared<Tanh>());
    }
  }
  return seq;
}

Batch data() {
  auto gen = at::detail::createCPUGenerator(1);
  at::Tensor x = at::randn({256, 7}, gen, at::TensorOptions().dtype(at::kDouble));
  at::Tensor y = x.matmul(at::randn({7, 5}, gen, at::TensorOptions().dtype(at::kDouble))).argmax(1);
  return Batch(x, y);
}

std::shared_ptr<torch::optim::Optimizer> make_optimizer(const std::string& name, torch::nn::Module& model) {
  std::vector<at::Tensor> weights, biases;
  for (const auto& p : model.named_parameters())
    (p.key().find("bias") != std::string::npos ? biases : weights).push_back(p.value());
  if (name == "adamw") {
    const auto opts = optim::DecoupledAdamWOptions(0.01).weight_decay(1e-4);
    std::vector<torch::optim::OptimizerParamGroup> groups{
        torch::optim::OptimizerParamGroup(weights, std::make_unique<optim::DecoupledAdamWOptions>(opts)),
        torch::optim::OptimizerParamGroup(biases, std::make_unique<optim::DecoupledAdamWOptions>(
                                                      optim::DecoupledAdamWOptions(opts).weight_decay(0)))};
    return std::make_shared<optim::DecoupledAdamW>(std::move(groups), opts);
  }
  if (name == "sgdw") {
    const auto opts = optim::DecoupledSGDWOptions(0.1).momentum(0.9).weight_decay(0.01);
    std::vector<torch::optim::OptimizerParamGroup> groups{
        torch::optim::OptimizerParamGroup(weights, std::make_unique<optim::DecoupledSGDWOptions>(opts)),
        torch::optim::OptimizerParamGroup(
            biases, std::make_unique<optim::DecoupledSGDWOptions>(optim::DecoupledSGDWOptions(opts).weight_decay(0)))};
    return std::make_shared<optim::DecoupledSGDW>(std::move(groups), opts);
  }
  throw std::invalid_argument("fsdp_worker: optimizer must be adamw or sgdw, got " + name);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 5) {
    std::cerr << "usage: fsdp_worker OUT STRATEGY OPTIMIZER MICROBATCH [CLIP]\n";
    return 2;
  }
  const std::string out = argv[1], strategy = argv[2], optimizer = argv[3];
  const int64_t microbatch = std::stoll(argv[4]);
  const std::string clipping = argc > 5 ? argv[5] : "";
  const int64_t world = dist::get_world_size(), rank = dist::get_global_rank();

  torch::manual_seed(100);  // the same initial weights on every rank (sync_module_states is off by default)
  torch::nn::Sequential net(torch::nn::Linear(7, 31), torch::nn::Tanh(), torch::nn::Linear(31, 5));
  net->to(at::kDouble);
  const auto env = [](const char* name) { return std::string(std::getenv(name) ? std::getenv(name) : ""); };
  const bool offload = env("FSDP_WORKER_ACTIVATION_CHECKPOINTING") == "offload";  // with activation_cpu_offload
  const bool checkpointing = env("FSDP_WORKER_ACTIVATION_CHECKPOINTING") == "1" || offload;
  const bool nn_layers = checkpointing || env("FSDP_WORKER_NN_LAYERS") == "1";
  auto model = nn_layers ? ComposerClassifier::wrap(as_nn_layers(net)) : ComposerClassifier::wrap(net);
  const std::string freeze = env("FSDP_WORKER_FREEZE");
  const std::map<std::string, std::vector<size_t>> frozen{
      {"", {}}, {"bias", {1, 3}}, {"first", {0, 1}}, {"last", {2, 3}}};
  for (const size_t i : frozen.at(freeze)) model->parameters()[i].set_requires_grad(false);
  auto opt = make_optimizer(optimizer, *model);
  auto loader = std::make_shared<DatasetLoader>(
      std::make_shared<TensorDataset>(data()),
      DatasetLoaderOptions(24 / world).shuffle(true).seed(3).num_workers(0).num_replicas(world).rank(rank));
  const Batch all = data();  // evaluated on 240 samples in batches of 20 (12 batches: whole ones on 2, 3 and 4 ranks)
  auto eval_loader = std::make_shared<DatasetLoader>(
      std::make_shared<TensorDataset>(Batch(all.input().narrow(0, 0, 240), all.target().narrow(0, 0, 240))),
      DatasetLoaderOptions(20).num_workers(0).num_replicas(world).rank(rank));
  std::vector<std::shared_ptr<Algorithm>> algos;
  if (!clipping.empty()) algos.push_back(testing::gradient_clipping_from_spec(clipping));
  const std::string algorithm = std::getenv("FSDP_WORKER_ALGORITHM") ? std::getenv("FSDP_WORKER_ALGORITHM") : "";
  std::shared_ptr<algorithms::EMA> ema;
  if (!algorithm.empty()) algos.push_back(testing::copy_keeping_algorithm(algorithm, "FSDP_WORKER_ALGORITHM", ema));
  TrainerOptions options = TrainerOptions(model)
                               .algorithms(algos)
                               .train_dataloader(loader)
                               .eval_dataloader(eval_loader)
                               .optimizer(opt)
                               .max_duration("6ba")
                               .device("cpu")
                               .seed(7)
                               .progress_bar(false)
                               .dist_timeout(60)
                               .device_train_microbatch_size(microbatch);
  auto grad_norms = std::make_shared<testing::GradNorms>();
  if (env("FSDP_WORKER_GRAD_NORMS") == "1") {
    options.callbacks({std::make_shared<OptimizerMonitor>(OptimizerMonitorOptions().batch_log_interval(1))});
    options.loggers({grad_norms});
  }
  if (!env("FSDP_WORKER_SAVE").empty())
    options.save_folder(env("FSDP_WORKER_SAVE")).save_interval("3ba").run_name("fsdp");
  if (env("FSDP_WORKER_SAVE_ASYNC") == "1") options.save_async(true);
  if (!env("FSDP_WORKER_KEEP").empty()) options.save_num_checkpoints_to_keep(std::stoll(env("FSDP_WORKER_KEEP")));
  const bool rank0_only = env("FSDP_WORKER_RANK0_ONLY") == "1";
  if (!env("FSDP_WORKER_LOAD").empty())  // with rank0_only, a path that exists on rank 0 only
    options.load_path(env("FSDP_WORKER_LOAD") + (rank0_only && rank != 0 ? ".not-on-this-rank" : ""));
  if (env("FSDP_WORKER_AUTORESUME") == "1") options.autoresume(true);
  if (strategy != "ddp") {
    const std::string prefetch = env("FSDP_WORKER_BACKWARD_PREFETCH");
    const dist::BackwardPrefetch backward_prefetch =
        dist::backward_prefetch_from_string(prefetch.empty()     ? "BACKWARD_POST"
                                            : prefetch == "NONE" ? prefetch
                                                                 : "BACKWARD_" + prefetch,
                                            "FSDP_WORKER_BACKWARD_PREFETCH");
    // The float64 model computes in float64 (FULL) unless FSDP_WORKER_MIXED_PRECISION says otherwise: "f32"
    // (param_dtype float32; the reduction then in float32 too, torch's rule), "f32-reduce64" (reduce_dtype
    // float64) or a preset.
    const std::string mp = env("FSDP_WORKER_MIXED_PRECISION");
    dist::FSDPMixedPrecision mixed = dist::FSDPMixedPrecision::of(mp.empty() ? "FULL" : mp);
    if (mp == "f32") mixed = dist::FSDPMixedPrecision::custom({at::kFloat, std::nullopt, std::nullopt});
    if (mp == "f32-reduce64") mixed = dist::FSDPMixedPrecision::custom({at::kFloat, at::kDouble, std::nullopt});
    const auto units = [](const std::string&, const torch::nn::Module& m) {
      return m.name().find("Linear") != std::string::npos;
    };
    dist::FSDPOptions fsdp;
    if (!env("FSDP_WORKER_REPLICATE").empty())
      fsdp.data_parallel_replicate_degree(std::stoll(env("FSDP_WORKER_REPLICATE")));
    options.parallelism_config(
        dist::ParallelismConfig().fsdp(fsdp.sharding_strategy(dist::sharding_strategy_from_string(strategy, "STRATEGY"))
                                           .wrap_policy(units)
                                           .auto_wrap(env("FSDP_WORKER_ONE_UNIT") != "1")
                                           .activation_checkpointing(checkpointing)
                                           .activation_cpu_offload(offload)
                                           .load_monolith_rank0_only(rank0_only)
                                           .forward_prefetch(env("FSDP_WORKER_FORWARD_PREFETCH") == "1")
                                           .backward_prefetch(backward_prefetch)
                                           .mixed_precision(mixed)
                                           .state_dict_type(env("FSDP_WORKER_SHARDED") == "1" ? "sharded" : "full")));
  }
  Trainer trainer(options);
  if (!env("FSDP_WORKER_RESAVE").empty()) {
    const c10::IValue payload = make_checkpoint(trainer.state());  // a collective under FSDP
    if (rank == 0) write_file_atomically(env("FSDP_WORKER_RESAVE"), torch::pickle_save(payload));
    trainer.close();
    return 0;
  }
  trainer.fit();

  Dict w(c10::StringType::get(), c10::TensorType::get());
  if (auto* fsdp = dynamic_cast<dist::FullyShardedDataParallel*>(trainer.state().strategy.get())) {
    const dist::ShardedMemory mem = fsdp->memory();
    std::cout << "shard_bytes " << mem.parameter_bytes << "\nfull_bytes " << mem.full_parameter_bytes << "\nunits "
              << mem.num_units << "\nper_unit " << mem.per_unit_gathered << "\npeak_gathered "
              << mem.peak_training_gathered_bytes << "\noutputs_dtype "
              << c10::toString(trainer.state().outputs.scalar_type()) << "\nstrategy "
              << dist::to_string(fsdp->effective_strategy()) << "\nmesh " << fsdp->mesh().replicate << " "
              << fsdp->mesh().shard << std::endl;
    for (const auto& [name, value] : fsdp->gathered_parameters()) w.insert(name, value);
  } else {
    for (const auto& p : model->named_parameters()) w.insert(p.key(), p.value().detach().clone());
  }
  if (ema) {  // the averaged weights, whole (a collective under FSDP: every rank asks)
    const c10::IValue state = ema->state_dict();
    const auto averaged = state.toGenericDict().at("ema_model").toGenericDict().at("named_parameters_dict");
    if (rank == 0) write_file_atomically(out + ".ema", torch::pickle_save(averaged));
  }
  if (rank == 0) {
    write_file_atomically(out, torch::pickle_save(w));
    std::cout << "loss " << trainer.state().total_loss_dict["loss/train/total"] << std::endl;
    for (const auto& [name, value] : trainer.state().eval_metric_values)
      std::cout << "eval " << name << " " << std::setprecision(17) << value << std::endl;
    for (const auto& [key, value] : grad_norms->last)
      std::cout << "monitored " << key << " " << std::setprecision(17) << value << std::endl;
  }
  trainer.close();
  return 0;
} catch (const std::exception& e) {
  std::cerr << "fsdp_worker: " << brief_error(e) << "\n";
  return 1;
}
