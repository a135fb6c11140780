// bench/fsdp_scaling: step time and per-rank memory of DDP, FULL_SHARD and SHARD_GRAD_OP (run under
// composer-cpp launch -n N; bench/fsdp_scaling.sh runs 1, 2 and 4 ranks).
//   fsdp_scaling --strategy ddp|FULL_SHARD|SHARD_GRAD_OP [--layers 12] [--d-model 768] [--heads 12] [--seq 64]
//                [--batch 2] [--steps 4] [--activation-checkpointing 0|1] [--backward-prefetch PRE|POST|NONE]
//                [--forward-prefetch 0|1] [--checkpoint full|sharded --checkpoint-dir DIR] [--model gpt2|smollm2]
//                [--deferred 0|1] [--tp N --tp-plan default|mlp|mlp+vocab --loss-parallel 0|1
//                --sequence-parallel 0|1]
// --model gpt2 (the default): a GPT-2-small-shaped decoder (vocab 50257, 12 layers, d_model 768: 124M parameters at
// seq 1024; the position table is --seq long here; --layers, --d-model, --heads change it); --model smollm2: the
// SmolLM2-135M-shaped Llama (vocab 49152, 30 layers, hidden 576, 9 query and 3 key-value heads, MLP 1536, tied
// embeddings: 134.5M parameters; --layers changes the depth). Random tokens, DecoupledAdamW, float32. Prints on every
// rank, after the steps:
//   RESULT fsdp_scaling model=M strategy=S activation_checkpointing=A deferred=D world=N rank=K setup_peak_mib=I
//   step_ms=T param_bytes=P grad_bytes=G optim_bytes=O peak_rss_mib=R per_unit=U peak_gathered_mib=M
// --deferred 1 builds the model under nn::DeferredInit (FSDP draws it unit by unit, each sharded as it is drawn);
// setup_peak_mib: the resident high-water mark from building the model to the end of the Trainer's construction.
// param_bytes/grad_bytes/optim_bytes: what the rank keeps between steps (FSDP: its shards; DDP: full replicas);
// step_ms: the median of the steps after the first; peak_rss_mib: the process's high-water resident memory;
// per_unit: the sharding units gathered around their own passes; peak_gathered_mib: the most gathered parameter
// bytes at once in training passes (FSDP only).
// With --checkpoint, after training the state is saved once into DIR (full: every rank gathers, rank 0 writes one
// file; sharded: every rank writes its DCP file) and read back into the trainer, and the line adds
//   checkpoint=K save_ms=S load_ms=L save_peak_mib=A load_peak_mib=B disk_mib=D
// (the peaks are the resident high-water marks during the save and the load alone, reset before each).
// --tp N (with an FSDP --strategy) adds tensor parallelism of degree N (parallelism_config.tp) with the model's plan
// (--tp-plan default) or the MLPs' layers only (--tp-plan mlp: SmolLM2's 3 key-value heads do not split in 2 or 4;
// mlp+vocab: and the token embedding rowwise, the tied head with it), --loss-parallel 1 sets tp.loss_parallel,
// --sequence-parallel 1 tp.sequence_parallel (with the default plan: SmolLM2's heads split in 3);
// the data is split over world / N data-parallel ranks, each reading N times --batch, so that the global batch is the
// same as without tp. The line then says tp=N plan=P loss_parallel=L sequence_parallel=Q.
#include "composer/composer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

using namespace composer;

namespace {

using Clock = std::chrono::steady_clock;

// Step times, and the gradient bytes the optimizer's parameters hold right after a step.
class StepTimes : public Callback {
 public:
  void before_train_batch(State&, Logger&) override { start_ = Clock::now(); }
  void batch_end(State& state, Logger&) override {
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start_).count());
    grad_bytes = 0;
    for (const auto& group : state.optimizer->param_groups())
      for (const auto& p : group.params())
        if (p.grad().defined()) grad_bytes += p.grad().numel() * static_cast<int64_t>(p.grad().element_size());
  }
  std::vector<double> ms;
  int64_t grad_bytes = 0;

 private:
  Clock::time_point start_;
};

int64_t tensor_bytes(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().numel() * static_cast<int64_t>(v.toTensor().element_size());
  int64_t n = 0;
  if (v.isGenericDict())
    for (const auto& e : v.toGenericDict()) n += tensor_bytes(e.value());
  if (v.isList())
    for (const auto& e : v.toList()) n += tensor_bytes(e);
  if (v.isTuple())
    for (const auto& e : v.toTupleRef().elements()) n += tensor_bytes(e);
  return n;
}

// Starts a new resident high-water mark (Linux: writing 5 to clear_refs resets VmHWM).
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

int64_t disk_bytes(const std::string& path) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(path)) return static_cast<int64_t>(fs::file_size(path));
  int64_t n = 0;
  for (const auto& e : fs::directory_iterator(path)) n += static_cast<int64_t>(fs::file_size(e.path()));
  return n;
}

double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return static_cast<double>(std::stoll(line.substr(6))) / 1024.0;
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string strategy = "ddp", checkpoint, checkpoint_dir, backward_prefetch = "BACKWARD_POST", model_name = "gpt2";
  int64_t layers = -1, d_model = 768, heads = 12, seq = 64, batch = 2, steps = 4;
  bool activation_checkpointing = false, forward_prefetch = false, deferred = false;
  int64_t tp = 1;
  std::string tp_plan = "default";
  bool loss_parallel = false, sequence_parallel = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--strategy")
      strategy = v;
    else if (k == "--layers")
      layers = std::stoll(v);
    else if (k == "--d-model")
      d_model = std::stoll(v);
    else if (k == "--heads")
      heads = std::stoll(v);
    else if (k == "--seq")
      seq = std::stoll(v);
    else if (k == "--batch")
      batch = std::stoll(v);
    else if (k == "--steps")
      steps = std::stoll(v);
    else if (k == "--activation-checkpointing")
      activation_checkpointing = v == "1";
    else if (k == "--backward-prefetch")
      backward_prefetch = v == "NONE" ? v : "BACKWARD_" + v;
    else if (k == "--forward-prefetch")
      forward_prefetch = v == "1";
    else if (k == "--checkpoint")
      checkpoint = v;
    else if (k == "--checkpoint-dir")
      checkpoint_dir = v;
    else if (k == "--model")
      model_name = v;
    else if (k == "--deferred")
      deferred = v == "1";
    else if (k == "--tp")
      tp = std::stoll(v);
    else if (k == "--tp-plan")
      tp_plan = v;
    else if (k == "--loss-parallel")
      loss_parallel = v == "1";
    else if (k == "--sequence-parallel")
      sequence_parallel = v == "1";
    else
      throw std::invalid_argument("unknown option " + k);
  }
  const int64_t world = dist::get_world_size(), rank = dist::get_global_rank();
  torch::manual_seed(0);
  std::shared_ptr<ComposerLanguageModel> model;
  int64_t vocab = 50257;
  reset_peak_rss();  // the setup's high-water mark: from building the model to the Trainer built
  std::optional<nn::DeferredInit> deferring;
  if (deferred) deferring.emplace();
  if (model_name == "smollm2") {
    vocab = 49152;
    model = std::make_shared<ComposerLanguageModel>(
        std::make_shared<models::Llama>(models::LlamaConfig()
                                            .vocab_size(vocab)
                                            .hidden_size(576)
                                            .intermediate_size(1536)
                                            .num_hidden_layers(layers > 0 ? layers : 30)
                                            .num_attention_heads(9)
                                            .num_key_value_heads(3)
                                            .max_position_embeddings(std::max<int64_t>(seq, 2048))
                                            .rms_norm_eps(1e-5)
                                            .rope_theta(100000)
                                            .tie_word_embeddings(true)));
  } else if (model_name == "gpt2") {
    model = std::make_shared<ComposerLanguageModel>(std::make_shared<models::GPT>(models::TransformerConfig()
                                                                                      .vocab_size(vocab)
                                                                                      .max_seq_len(seq)
                                                                                      .n_layer(layers > 0 ? layers : 12)
                                                                                      .n_head(heads)
                                                                                      .d_model(d_model)));
  } else {
    throw std::invalid_argument("--model must be gpt2 or smollm2, got " + model_name);
  }
  deferring.reset();
  auto opt = std::make_shared<optim::DecoupledAdamW>(model->parameters(), optim::DecoupledAdamWOptions(1e-4));
  auto gen = at::detail::createCPUGenerator(1);
  const at::Tensor tokens = at::randint(vocab, {(seq + 1) * batch * world * (steps + 1)}, gen, at::kLong);
  auto loader = std::make_shared<DatasetLoader>(make_lm_dataset(tokens, seq), DatasetLoaderOptions(batch * tp)
                                                                                  .shuffle(false)
                                                                                  .num_workers(0)
                                                                                  .num_replicas(world / tp)
                                                                                  .rank(rank / tp)
                                                                                  .drop_last(true));
  auto times = std::make_shared<StepTimes>();
  TrainerOptions options = TrainerOptions(model)
                               .train_dataloader(loader)
                               .optimizer(opt)
                               .max_duration(std::to_string(steps) + "ba")
                               .device("cpu")
                               .progress_bar(false)
                               .callbacks({times});
  if (strategy != "ddp") {
    dist::ParallelismConfig config = dist::ParallelismConfig().fsdp(
        dist::FSDPOptions()
            .sharding_strategy(dist::sharding_strategy_from_string(strategy, "--strategy"))
            .activation_checkpointing(activation_checkpointing)
            .backward_prefetch(dist::backward_prefetch_from_string(backward_prefetch, "--backward-prefetch"))
            .forward_prefetch(forward_prefetch));
    if (tp > 1) {
      dist::TPOptions tp_options = dist::TPOptions()
                                       .tensor_parallel_degree(tp)
                                       .loss_parallel(loss_parallel)
                                       .sequence_parallel(sequence_parallel);
      if (tp_plan == "mlp" || tp_plan == "mlp+vocab") {
        dist::TensorParallelPlan plan{{"model.model.layers.*.mlp.gate_proj", nn::ParallelStyle::COLWISE},
                                      {"model.model.layers.*.mlp.up_proj", nn::ParallelStyle::COLWISE},
                                      {"model.model.layers.*.mlp.down_proj", nn::ParallelStyle::ROWWISE}};
        if (tp_plan == "mlp+vocab") plan.push_back({"model.model.embed_tokens", nn::ParallelStyle::ROWWISE});
        tp_options.layer_plan(plan);
      } else if (tp_plan != "default") {
        throw std::invalid_argument("--tp-plan must be default, mlp or mlp+vocab, got " + tp_plan);
      }
      config.tp(tp_options);
    }
    options.parallelism_config(config);
  } else if (tp > 1) {
    throw std::invalid_argument("--tp needs an FSDP --strategy");
  }
  Trainer trainer(options);
  const double setup_peak = peak_rss_mib();
  trainer.fit();

  int64_t param_bytes = 0, per_unit = 0, peak_gathered = 0;
  const int64_t grad_bytes = times->grad_bytes;
  if (auto* fsdp = dynamic_cast<dist::FullyShardedDataParallel*>(trainer.state().strategy.get())) {
    param_bytes = fsdp->memory().parameter_bytes;
    per_unit = fsdp->memory().per_unit_gathered;
    peak_gathered = fsdp->memory().peak_training_gathered_bytes;
  } else {
    for (const auto& p : model->parameters()) param_bytes += p.numel() * static_cast<int64_t>(p.element_size());
  }
  const int64_t optim_bytes = tensor_bytes(opt->state_dict());
  std::vector<double> ms(times->ms.begin() + (times->ms.size() > 1 ? 1 : 0), times->ms.end());
  std::sort(ms.begin(), ms.end());
  const double run_peak = peak_rss_mib();
  std::ostringstream ckpt;
  if (!checkpoint.empty()) {
    if (checkpoint != "full" && checkpoint != "sharded") throw std::invalid_argument("--checkpoint full|sharded");
    const std::string path = checkpoint_dir + (checkpoint == "full" ? "/full.pt" : "/sharded");
    State& state = trainer.state();
    reset_peak_rss();
    dist::barrier();
    auto t0 = Clock::now();
    if (checkpoint == "sharded")
      save_distributed_checkpoint(state, path);
    else if (rank == 0)
      save_checkpoint(state, path);
    else
      (void)make_checkpoint(state);  // the same collectives as rank 0's
    dist::barrier();
    const double save_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    const double save_peak = peak_rss_mib();
    reset_peak_rss();
    t0 = Clock::now();
    {  // as the Trainer loads: a sharded checkpoint only in this rank's part
      std::vector<ShardedEntry> parts;
      const c10::IValue payload = read_checkpoint(path, local_parts_wanted(state), parts);
      apply_checkpoint(state, payload, CheckpointLoadOptions(), path, std::move(parts));
    }
    dist::barrier();
    const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    ckpt << " checkpoint=" << checkpoint << " save_ms=" << save_ms << " load_ms=" << load_ms
         << " save_peak_mib=" << save_peak << " load_peak_mib=" << peak_rss_mib()
         << " disk_mib=" << static_cast<double>(disk_bytes(path)) / (1024.0 * 1024.0);
  }
  std::cout << "RESULT fsdp_scaling model=" << model_name << " strategy=" << strategy
            << " activation_checkpointing=" << activation_checkpointing << " deferred=" << deferred << " tp=" << tp
            << " plan=" << tp_plan << " loss_parallel=" << loss_parallel << " sequence_parallel=" << sequence_parallel
            << " world=" << world << " rank=" << rank << " setup_peak_mib=" << setup_peak
            << " step_ms=" << (ms.empty() ? 0.0 : ms[ms.size() / 2]) << " param_bytes=" << param_bytes
            << " grad_bytes=" << grad_bytes << " optim_bytes=" << optim_bytes << " peak_rss_mib=" << run_peak
            << " per_unit=" << per_unit
            << " peak_gathered_mib=" << static_cast<double>(peak_gathered) / (1024.0 * 1024.0) << ckpt.str()
            << std::endl;
  trainer.close();
  return 0;
} catch (const std::exception& e) {
  std::cerr << "fsdp_scaling: " << brief_error(e) << "\n";
  return 1;
}
