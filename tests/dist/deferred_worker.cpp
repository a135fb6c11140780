// A rank for the deferred-initialization tests: a Llama-family decoder built with or without nn::DeferredInit, trained
// a few batches of random tokens (DecoupledSGDW without momentum, so that a rank keeps its shards and their gradients
// only), with FSDP FULL_SHARD (each LlamaDecoderLayer a unit) or, for "one", the default strategy.
// Usage: deferred_worker OUT MODE STRATEGY
//   OUT: a path, or - for no weights written; MODE: deferred or normal; STRATEGY: FULL_SHARD, one, or TPn (tensor
//   parallelism of degree n, the Llama's plan, FULL_SHARD over the data-parallel ranks)
// Rank 0 writes the full weights right after the Trainer is built to OUT.init and after training to OUT, and prints
// "loss L" (the last batch's). Every rank prints "start_batch B" (where training starts: B > 0 when resumed),
// "runtime_mib R" (its resident memory before the model is built), "setup_peak_mib P" (the resident high-water mark
// from building the model to the end of the Trainer's construction), "setup_vm_mib V" (the most address space
// mapped then, above what was mapped before building: what RLIMIT_AS limits), "model_mib W" (the whole model's fp32
// weights), "unit_mib U" (the largest sharding unit's), and after training "run_peak_mib", "run_vm_mib" (the same
// over the whole run) and, under FSDP, "per_unit", "peak_gathered_mib" and "shard_mib".
// From the environment: DEFERRED_WORKER_LAYERS, _HIDDEN, _INTERMEDIATE, _VOCAB size the model (2, 64, 160, 256);
// DEFERRED_WORKER_STEPS (2) the batches of 4 sequences of 16 tokens (split over the ranks; 8 batches an epoch);
// DEFERRED_WORKER_BUDGET_MIB=B limits the process's address space to what it maps before building the model plus B
// MiB (RLIMIT_AS); DEFERRED_WORKER_SAVE=DIR saves a checkpoint into DIR after the last batch (sharded, or with
// DEFERRED_WORKER_STATE_DICT=full one file);
// DEFERRED_WORKER_LOAD=PATH loads PATH before training (and then trains DEFERRED_WORKER_STEPS more batches);
// DEFERRED_WORKER_SEQ (16) and DEFERRED_WORKER_BATCH (4) size the batches; DEFERRED_WORKER_MICROBATCH (0: whole)
// sets device_train_microbatch_size (a number or auto; every rank prints "microbatch M", the size in use at the end);
// DEFERRED_WORKER_BUDGET_RANK=R limits rank R alone;
// DEFERRED_WORKER_PRETRAINED=DIR|FILE.gguf loads a pretrained Llama instead (load_llama_hf, load_llama_gguf);
// DEFERRED_WORKER_LORA=R adds LoRA adapters of rank R (PEFT's default targets), the rest of the model frozen.
// Every rank prints "setup_read_mib R": the bytes it read (rchar) from building the model to the Trainer built.
#include "support/memory_limit.h"
#include "support/worker_outputs.h"

#include "composer/composer.h"

#include <torch/serialize.h>
#include <torch/torch.h>

#include <fstream>
#include <iomanip>
#include <iostream>

using namespace composer;
using testing::env_or;
using testing::full_weights;
using testing::write_weights;

namespace {

// The number after "KEY:" in /proc/self/FILE, scaled to MiB from kB (status) or bytes (io: rchar, bytes read).
double proc_mib(const char* file, const char* key) {
  std::ifstream in(std::string("/proc/self/") + file);
  const std::string prefix = std::string(key) + ":";
  const double unit = std::string(file) == "status" ? 1024.0 : 1048576.0;
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) return static_cast<double>(std::stoll(line.substr(prefix.size()))) / unit;
  return 0;
}
double status_mib(const char* key) { return proc_mib("status", key); }
double io_mib(const char* key) { return proc_mib("io", key); }

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

models::LlamaConfig config() {
  return models::LlamaConfig()
      .vocab_size(std::stoll(env_or("DEFERRED_WORKER_VOCAB", "256")))
      .hidden_size(std::stoll(env_or("DEFERRED_WORKER_HIDDEN", "64")))
      .intermediate_size(std::stoll(env_or("DEFERRED_WORKER_INTERMEDIATE", "160")))
      .num_hidden_layers(std::stoll(env_or("DEFERRED_WORKER_LAYERS", "2")))
      .num_attention_heads(4)
      .num_key_value_heads(2)
      .max_position_embeddings(64)
      .tie_word_embeddings(true);
}

// The model: DEFERRED_WORKER_PRETRAINED's (a Hugging Face directory or a GGUF file), or a random one.
std::shared_ptr<models::Llama> build() {
  const std::string pretrained = env_or("DEFERRED_WORKER_PRETRAINED");
  if (pretrained.empty()) return std::make_shared<models::Llama>(config());
  if (pretrained.size() > 5 && pretrained.compare(pretrained.size() - 5, 5, ".gguf") == 0)
    return models::load_llama_gguf(pretrained);
  return models::load_llama_hf(pretrained);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 4) {
    std::cerr << "usage: deferred_worker OUT MODE STRATEGY\n";
    return 2;
  }
  const std::string out = argv[1], mode = argv[2], strategy = argv[3];
  if (mode != "deferred" && mode != "normal") throw std::invalid_argument("MODE must be deferred or normal");
  const int64_t world = dist::get_world_size(), rank = dist::get_global_rank();
  const int64_t steps = std::stoll(env_or("DEFERRED_WORKER_STEPS", "2"));
  const int64_t vocab = config().vocab_size();
  const int64_t seq = std::stoll(env_or("DEFERRED_WORKER_SEQ", "16")),
                batch = std::stoll(env_or("DEFERRED_WORKER_BATCH", "4"));
  auto gen = at::detail::createCPUGenerator(1);
  const at::Tensor tokens = at::randint(vocab, {(seq + 1) * batch * 8}, gen, at::kLong);  // 8 batches an epoch
  if (world > 1) dist::initialize_dist(c10::Device(c10::kCPU), std::chrono::seconds(120));
  dist::barrier();                                                 // the process group and its threads exist
  (void)at::matmul(at::ones({64, 64}), at::ones({64, 64})).sum();  // and the compute threads
  const double runtime = status_mib("VmRSS"), runtime_vm = status_mib("VmSize");
  const std::string limited_rank = env_or("DEFERRED_WORKER_BUDGET_RANK");
  if (!env_or("DEFERRED_WORKER_BUDGET_MIB").empty() && (limited_rank.empty() || std::stoll(limited_rank) == rank))
    testing::limit_address_space(std::stoll(env_or("DEFERRED_WORKER_BUDGET_MIB")) * 1024 * 1024);
  std::ofstream("/proc/self/clear_refs") << "5";  // the high-water mark from here on

  torch::manual_seed(11);
  const double read_before = io_mib("rchar");
  std::shared_ptr<models::Llama> llama;
  const auto build_and_adapt = [] {
    auto built = build();
    if (!env_or("DEFERRED_WORKER_LORA").empty())
      models::apply_lora(*built, models::LoraOptions().r(std::stoll(env_or("DEFERRED_WORKER_LORA"))));
    return built;
  };
  if (mode == "deferred") {
    nn::DeferredInit deferred;
    llama = build_and_adapt();
  } else {
    llama = build_and_adapt();
  }
  int64_t model_bytes = 0, unit_bytes = 0;
  for (const auto& p : llama->parameters()) model_bytes += p.numel() * 4;
  for (const auto& layer : llama->named_modules("", false)) {
    if (!dynamic_cast<models::LlamaDecoderLayer*>(layer.value().get())) continue;
    int64_t bytes = 0;
    for (const auto& p : layer.value()->parameters()) bytes += p.numel() * 4;
    unit_bytes = std::max(unit_bytes, bytes);
  }
  int64_t root_bytes = model_bytes;  // the root unit: what no decoder layer holds (the embedding and the last norm)
  for (const auto& layer : llama->named_modules("", false))
    if (dynamic_cast<models::LlamaDecoderLayer*>(layer.value().get()))
      for (const auto& p : layer.value()->parameters()) root_bytes -= p.numel() * 4;
  unit_bytes = std::max(unit_bytes, root_bytes);

  auto model = std::make_shared<ComposerLanguageModel>(llama);
  auto opt = std::make_shared<optim::DecoupledSGDW>(model->parameters(), optim::DecoupledSGDWOptions(0.5));
  const int64_t tp = strategy.rfind("TP", 0) == 0 ? std::stoll(strategy.substr(2)) : 1;
  const int64_t replicas = world / tp;  // a tensor-parallel group's ranks read the same batch
  auto loader = std::make_shared<DatasetLoader>(make_lm_dataset(tokens, seq), DatasetLoaderOptions(batch / replicas)
                                                                                  .shuffle(false)
                                                                                  .num_workers(0)
                                                                                  .num_replicas(replicas)
                                                                                  .rank(rank / tp)
                                                                                  .drop_last(true));
  TrainerOptions options =
      TrainerOptions(model)
          .train_dataloader(loader)
          .optimizer(opt)
          .max_duration(std::to_string(steps) + "ba")
          .device("cpu")
          .device_train_microbatch_size(env_or("DEFERRED_WORKER_MICROBATCH", "0") == "0"
                                            ? MicrobatchSize()
                                            : MicrobatchSize::parse(env_or("DEFERRED_WORKER_MICROBATCH")))
          .seed(5)
          .progress_bar(false)
          .dist_timeout(120);
  if (strategy != "one") {
    const auto units = [](const std::string&, const torch::nn::Module& m) {
      return dynamic_cast<const models::LlamaDecoderLayer*>(&m) != nullptr;
    };
    auto parallelism = dist::ParallelismConfig().fsdp(
        dist::FSDPOptions()
            .sharding_strategy(dist::sharding_strategy_from_string(tp > 1 ? "FULL_SHARD" : strategy, "STRATEGY"))
            .wrap_policy(units)
            .state_dict_type(env_or("DEFERRED_WORKER_STATE_DICT", "sharded")));
    if (tp > 1) parallelism.tp(dist::TPOptions().tensor_parallel_degree(tp));
    options.parallelism_config(parallelism);
  }
  if (!env_or("DEFERRED_WORKER_SAVE").empty())
    options.save_folder(env_or("DEFERRED_WORKER_SAVE"))
        .save_interval(std::to_string(steps) + "ba")
        .run_name("deferred");
  if (!env_or("DEFERRED_WORKER_LOAD").empty()) {
    options.load_path(env_or("DEFERRED_WORKER_LOAD"));
    options.max_duration(std::to_string(2 * steps) + "ba");
  }
  Trainer trainer(options);
  const double setup_peak = status_mib("VmHWM"), setup_vm = status_mib("VmPeak") - runtime_vm;
  const double setup_read = io_mib("rchar") - read_before;
  std::cout << "start_batch " << trainer.state().timestamp.batch << "\nruntime_mib " << runtime << "\nsetup_peak_mib "
            << setup_peak << "\nmodel_mib " << mib(model_bytes) << "\nunit_mib " << mib(unit_bytes) << "\nsetup_vm_mib "
            << setup_vm << "\nsetup_read_mib " << setup_read << std::endl;
  const bool writes = out != "-";  // "-": no weights gathered (they would not fit under a budget)
  if (writes) {
    const auto initial = full_weights(trainer, *model);
    if (rank == 0) write_weights(out + ".init", initial);
  }
  trainer.fit();
  if (writes) {
    const auto trained = full_weights(trainer, *model);
    if (rank == 0) write_weights(out, trained);
  }
  if (rank == 0)
    std::cout << "loss " << std::setprecision(17) << trainer.state().total_loss_dict["loss/train/total"] << std::endl;
  std::cout << "microbatch " << trainer.state().device_train_microbatch_size << std::endl;
  std::cout << "run_peak_mib " << status_mib("VmHWM") << "\nrun_vm_mib " << status_mib("VmPeak") - runtime_vm
            << std::endl;
  if (auto* fsdp = dynamic_cast<dist::FullyShardedDataParallel*>(trainer.state().strategy.get())) {
    std::cout << "per_unit " << fsdp->memory().per_unit_gathered << "\npeak_gathered_mib "
              << mib(fsdp->memory().peak_training_gathered_bytes) << "\nshard_mib "
              << mib(fsdp->memory().parameter_bytes) << std::endl;
  }
  trainer.close();
  return 0;
} catch (const std::exception& e) {
  std::cerr << "deferred_worker: " << brief_error(e) << "\n";
  return 1;
}
