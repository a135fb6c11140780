// A rank for the tensor-parallelism tests: float64 training of a small Llama-family decoder (8 query and 4 key-value
// heads of 8 features, 2 layers) or GPT-2 (4 heads of 8 features, 2 layers) on random tokens, 4 batches of 8
// sequences of 12 tokens (split over the data-parallel ranks), DecoupledAdamW.
// Usage: tp_worker OUT MODEL LAYOUT
//   MODEL: llama, gpt2 or bert (BertMLM, 4 heads of 8 features, 2 layers, on the same next-token targets)
//   LAYOUT: one (the default strategy, one process), tpN (FSDP over one data-parallel rank, tensor_parallel_degree N),
//     SxN (FULL_SHARD over S data-parallel ranks x tensor_parallel_degree N), fsdpS (FULL_SHARD over S ranks, no tp)
// Rank 0 writes the full weights after training to OUT (a pickled name -> tensor dict) and prints "loss L" (the last
// batch's) and "samples S" (the samples the run has seen); every rank prints "dp R N" (its data-parallel rank and
// the data-parallel size) and, under FSDP, "tp D" (the degree in effect) and "shard_bytes B" (its parameters' parts).
// From the environment: TP_WORKER_MICROBATCH (device_train_microbatch_size; 0: the whole batch), TP_WORKER_CLIP
// (TYPE:THRESHOLD for GradientClipping), TP_WORKER_STEPS (4) the batches trained, TP_WORKER_SAVE=DIR saves a full
// checkpoint into DIR after the last batch (TP_WORKER_SHARDED=1: a sharded one), TP_WORKER_LOAD=PATH loads PATH first
// (and then trains TP_WORKER_STEPS more), TP_WORKER_ALGORITHM=ema adds EMA (smoothing 0.6 every batch; rank 0 also
// writes EMA's averaged weights to OUT.ema), TP_WORKER_GRAD_NORMS=1 adds an OptimizerMonitor and rank 0 prints
// "monitored KEY VALUE" for the last batch's l2 norms, TP_WORKER_PLAN=mlp gives a user layer_plan splitting the MLPs
// only (=vocab: the model's plan and its token embedding rowwise, for GPT-2), TP_WORKER_TIED=1 ties the Llama's head,
// TP_WORKER_LOSS_PARALLEL=1 sets loss_parallel, TP_WORKER_SEQUENCE_PARALLEL=1 sequence_parallel, TP_WORKER_SEQ the
// sequence length (12), TP_WORKER_GENERATE=N generates N tokens greedily after training (rank 0 prints "generated
// T..." : the prompts [[1..4], [5..8]] and their continuations, row by row; every rank "generation_cached C", 1
// when the key-value cache was used), TP_WORKER_ACTIVATION_CHECKPOINTING=1 checkpoints the Llama's decoder layers under
// FSDP, TP_WORKER_DROPOUT GPT-2's dropout (0), TP_WORKER_BATCH the global batch (8), TP_WORKER_LIMIT=MIB:RANK a memory
// limit (below), TP_WORKER_EXPORT=FORMAT exports the trained model (ExportForInferenceCallback) to OUT.export,
// TP_WORKER_DEFERRED=1 builds the model under nn::DeferredInit (in float64). Rank 0 prints "metric KEY VALUE" for the
// train metrics.
#include "support/clipping_spec.h"
#include "support/memory_limit.h"
#include "support/worker_outputs.h"

#include "composer/composer.h"

#include <torch/serialize.h>
#include <torch/torch.h>

#include <iomanip>
#include <iostream>
#include <map>

using namespace composer;
using testing::env_or;
using testing::full_weights;
using testing::write_weights;

namespace {

std::shared_ptr<nn::Layer> build(const std::string& model) {
  if (model == "llama") {
    return std::make_shared<models::Llama>(models::LlamaConfig()
                                               .vocab_size(96)
                                               .hidden_size(64)
                                               .intermediate_size(96)
                                               .num_hidden_layers(2)
                                               .num_attention_heads(8)
                                               .num_key_value_heads(4)
                                               .max_position_embeddings(32)
                                               .tie_word_embeddings(env_or("TP_WORKER_TIED") == "1"));
  }
  if (model == "gpt2") {
    return std::make_shared<models::GPT>(
        models::TransformerConfig().vocab_size(96).max_seq_len(32).n_layer(2).n_head(4).d_model(32).d_ff(64).dropout(
            std::stod(env_or("TP_WORKER_DROPOUT", "0"))));
  }
  if (model == "bert") {  // bidirectional, trained here on the next-token targets like the decoders
    return std::make_shared<models::BertMLM>(
        models::TransformerConfig().vocab_size(96).max_seq_len(32).n_layer(2).n_head(4).d_model(32).d_ff(64));
  }
  throw std::invalid_argument("MODEL must be llama, gpt2 or bert, got '" + model + "'");
}

// The layout's (shard degree, tensor-parallel degree); (0, 0) for one process.
std::pair<int64_t, int64_t> layout_of(const std::string& layout) {
  if (layout == "one") return {0, 0};
  if (layout.rfind("tp", 0) == 0) return {1, std::stoll(layout.substr(2))};
  if (layout.rfind("fsdp", 0) == 0) return {std::stoll(layout.substr(4)), 1};
  const auto x = layout.find('x');
  if (x == std::string::npos)
    throw std::invalid_argument("LAYOUT must be one, tpN, fsdpS or SxN, got '" + layout + "'");
  return {std::stoll(layout.substr(0, x)), std::stoll(layout.substr(x + 1))};
}

dist::ParallelismConfig parallelism(int64_t shard, int64_t degree, const torch::nn::Module& model) {
  dist::FSDPOptions fsdp = dist::FSDPOptions()
                               .data_parallel_shard_degree(shard)
                               .mixed_precision(dist::FSDPMixedPrecision::of("FULL"))  // float64 throughout
                               .state_dict_type(env_or("TP_WORKER_SHARDED") == "1" ? "sharded" : "full");
  dist::TPOptions tp = dist::TPOptions()
                           .tensor_parallel_degree(degree)
                           .loss_parallel(env_or("TP_WORKER_LOSS_PARALLEL") == "1")
                           .sequence_parallel(env_or("TP_WORKER_SEQUENCE_PARALLEL") == "1");
  if (env_or("TP_WORKER_PLAN") == "mlp") {
    tp.layer_plan(dist::TensorParallelPlan{{"model.model.layers.*.mlp.gate_proj", nn::ParallelStyle::COLWISE},
                                           {"model.model.layers.*.mlp.up_proj", nn::ParallelStyle::COLWISE},
                                           {"model.model.layers.*.mlp.down_proj", nn::ParallelStyle::ROWWISE}});
  }
  if (env_or("TP_WORKER_PLAN") == "vocab") {
    dist::TensorParallelPlan plan = dist::default_tensor_parallel_plan(model);
    plan.push_back({"model.wte", nn::ParallelStyle::ROWWISE});
    tp.layer_plan(plan);
  }
  if (env_or("TP_WORKER_ACTIVATION_CHECKPOINTING") == "1") {  // the decoder layers, recomputed in the backward
    fsdp.activation_checkpointing(true).activation_checkpointing_policy(
        [](const std::string&, const torch::nn::Module& m) {
          return dynamic_cast<const models::LlamaDecoderLayer*>(&m) != nullptr;
        });
  }
  return dist::ParallelismConfig().fsdp(fsdp).tp(tp);
}

// The model in float64: converted after a normal build, or, with TP_WORKER_DEFERRED=1, built under nn::DeferredInit
// with float64 the default dtype (drawn when materialized: by units under FSDP, each split part kept).
std::shared_ptr<nn::Layer> build_in_float64(const std::string& model_name) {
  if (env_or("TP_WORKER_DEFERRED") != "1") {
    auto net = build(model_name);
    net->to(at::kDouble);
    return net;
  }
  const caffe2::TypeMeta saved = at::get_default_dtype();
  at::set_default_dtype(caffe2::TypeMeta::Make<double>());
  std::shared_ptr<nn::Layer> net;
  {
    nn::DeferredInit deferred;
    net = build(model_name);
  }
  at::set_default_dtype(saved);
  return net;
}

// TP_WORKER_LIMIT=MIB:RANK: at the first batch, rank RANK caps its address space at what it maps then plus MIB
// (support/memory_limit.h), so that a whole batch's activations no longer fit; every rank prints "train_microbatch N"
// after each batch (the size automatic microbatching settled on).
class LimitAndReport : public Callback {
 public:
  explicit LimitAndReport(const std::string& spec) {
    const auto colon = spec.find(':');
    budget_ = std::stoll(spec.substr(0, colon)) << 20;
    limited_ = colon != std::string::npos && std::stoll(spec.substr(colon + 1)) == dist::get_global_rank();
  }
  void before_train_batch(State&, Logger&) override {
    if (!limited_ || applied_) return;  // a redone batch fires BEFORE_TRAIN_BATCH again
    applied_ = true;
    testing::limit_address_space(budget_);
    std::cout << "limited to " << (budget_ >> 20) << " MiB more" << std::endl;
  }
  void batch_end(State& state, Logger&) override {
    std::cout << "train_microbatch " << state.device_train_microbatch_size << std::endl;
  }

 private:
  int64_t budget_ = 0;
  bool limited_ = false, applied_ = false;
};

// TP_WORKER_GENERATE=N: N tokens greedily generated after the prompts [[1..4], [5..8]] from the trained model,
// gathered as for evaluation ("" for N = 0). Every rank generates (a collective under FSDP).
std::string generate(Trainer& trainer, nn::Layer& net, int64_t n) {
  if (n <= 0) return "";
  at::Tensor tokens;
  {
    const auto scope = trainer.state().strategy->enter(dist::Phase::EVAL_FORWARD);
    tokens = models::generate_tokens(net, at::arange(1, 9, at::kLong).view({2, 4}),
                                     models::GenerationOptions().max_new_tokens(n));
  }
  const auto* decoder = dynamic_cast<const models::IncrementalDecoder*>(&net);
  std::cout << "generation_cached " << (decoder && decoder->supports_cache() ? 1 : 0) << std::endl;
  std::string text;
  for (int64_t i = 0; i < tokens.numel(); ++i) text += " " + std::to_string(tokens.view(-1)[i].item<int64_t>());
  return text;
}

// Rank 0's lines: the last loss, the samples seen, the train metrics, the monitored norms, the generated tokens.
void print_results(Trainer& trainer, const testing::GradNorms& grad_norms, const std::string& generated) {
  std::cout << "loss " << std::setprecision(17) << trainer.state().total_loss_dict["loss/train/total"] << "\nsamples "
            << trainer.state().timestamp.sample << std::endl;
  for (const auto& [key, value] : trainer.state().train_metric_values)
    std::cout << "metric " << key << " " << std::setprecision(17) << value << std::endl;
  for (const auto& [key, value] : grad_norms.last)
    std::cout << "monitored " << key << " " << std::setprecision(17) << value << std::endl;
  if (!generated.empty()) std::cout << "generated" << generated << std::endl;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 4) {
    std::cerr << "usage: tp_worker OUT MODEL LAYOUT\n";
    return 2;
  }
  const std::string out = argv[1], model_name = argv[2];
  const auto [shard, degree] = layout_of(argv[3]);
  const int64_t world = dist::get_world_size(), rank = dist::get_global_rank();
  if (world > 1) dist::initialize_dist(c10::Device(c10::kCPU), std::chrono::seconds(120));
  const int64_t steps = std::stoll(env_or("TP_WORKER_STEPS", "4"));
  const int64_t seq = std::stoll(env_or("TP_WORKER_SEQ", "12")), batch = std::stoll(env_or("TP_WORKER_BATCH", "8"));
  auto gen = at::detail::createCPUGenerator(1);
  const at::Tensor tokens = at::randint(96, {(seq + 1) * batch * 8}, gen, at::kLong);  // 8 batches an epoch

  torch::manual_seed(7);
  const auto net = build_in_float64(model_name);
  auto model = std::make_shared<ComposerLanguageModel>(net);
  auto opt = std::make_shared<optim::DecoupledAdamW>(model->parameters(), optim::DecoupledAdamWOptions(1e-2));
  TrainerOptions options = TrainerOptions(model)
                               .optimizer(opt)
                               .max_duration(std::to_string(steps) + "ba")
                               .device("cpu")
                               .seed(5)
                               .progress_bar(false)
                               .dist_timeout(120);
  if (env_or("TP_WORKER_MICROBATCH", "0") != "0")
    options.device_train_microbatch_size(MicrobatchSize::parse(env_or("TP_WORKER_MICROBATCH")));
  if (shard > 0) options.parallelism_config(parallelism(shard, degree, *model));
  // The data split by data-parallel place: a tensor-parallel group's ranks read the same batches.
  const auto strategy = dist::make_strategy(options.parallelism_config(), at::kDouble);
  const int64_t dp = strategy->data_parallel_size(), dp_rank = strategy->data_parallel_rank();
  std::cout << "dp " << dp_rank << " " << dp << std::endl;
  options.train_dataloader(std::make_shared<DatasetLoader>(
      make_lm_dataset(tokens, seq),
      DatasetLoaderOptions(batch / dp).shuffle(false).num_workers(0).num_replicas(dp).rank(dp_rank).drop_last(true)));
  std::vector<std::shared_ptr<Algorithm>> algos;
  if (!env_or("TP_WORKER_CLIP").empty())
    algos.push_back(testing::gradient_clipping_from_spec(env_or("TP_WORKER_CLIP")));
  std::shared_ptr<algorithms::EMA> ema;
  if (!env_or("TP_WORKER_ALGORITHM").empty())
    algos.push_back(testing::copy_keeping_algorithm(env_or("TP_WORKER_ALGORITHM"), "TP_WORKER_ALGORITHM", ema));
  options.algorithms(algos);
  auto grad_norms = std::make_shared<testing::GradNorms>();
  std::vector<std::shared_ptr<Callback>> callbacks;
  if (env_or("TP_WORKER_GRAD_NORMS") == "1") {
    callbacks.push_back(std::make_shared<OptimizerMonitor>(OptimizerMonitorOptions().batch_log_interval(1)));
    options.loggers({grad_norms});
  }
  if (!env_or("TP_WORKER_EXPORT").empty()) {
    callbacks.push_back(std::make_shared<ExportForInferenceCallback>(
        ExportForInferenceOptions().save_format(env_or("TP_WORKER_EXPORT")).save_path(out + ".export")));
  }
  if (!env_or("TP_WORKER_LIMIT").empty())
    callbacks.push_back(std::make_shared<LimitAndReport>(env_or("TP_WORKER_LIMIT")));
  options.callbacks(callbacks);
  if (!env_or("TP_WORKER_SAVE").empty())
    options.save_folder(env_or("TP_WORKER_SAVE")).save_interval(std::to_string(steps) + "ba").run_name("tp");
  if (!env_or("TP_WORKER_LOAD").empty()) {
    options.load_path(env_or("TP_WORKER_LOAD"));
    options.max_duration(std::to_string(2 * steps) + "ba");
  }
  Trainer trainer(options);
  trainer.fit();
  const auto trained = full_weights(trainer, *model);
  if (rank == 0) write_weights(out, trained);
  if (ema) {  // the averaged weights, whole (a collective under FSDP: every rank asks)
    const c10::IValue state = ema->state_dict();
    const auto averaged = state.toGenericDict().at("ema_model").toGenericDict().at("named_parameters_dict");
    if (rank == 0) write_file_atomically(out + ".ema", torch::pickle_save(averaged));
  }
  if (auto* fsdp = dynamic_cast<dist::FullyShardedDataParallel*>(trainer.state().strategy.get()))
    std::cout << "tp " << fsdp->tensor_parallel_degree() << "\nshard_bytes " << fsdp->memory().parameter_bytes
              << std::endl;
  const std::string generated = generate(trainer, *net, std::stoll(env_or("TP_WORKER_GENERATE", "0")));
  if (rank == 0) print_results(trainer, *grad_norms, generated);
  trainer.close();
  return 0;
} catch (const std::exception& e) {
  std::cerr << "tp_worker: " << brief_error(e) << "\n";
  return 1;
}
