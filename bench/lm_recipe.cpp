// bench/lm_recipe: the language-model recipe on GPT-2 BPE tokens of public-domain texts (2-core CPU).
//
//   lm_recipe tokenize --out DIR [--texts data/texts] [--mobydick data/text/mobydick.txt] [--vocab data/gpt2]
//     GPT-2-encodes Moby Dick, Poe's works, Huckleberry Finn and the King James Bible (tools/fetch_data.sh text gpt2
//     texts), each followed by <|endoftext|>; the last 2 % of each text's tokens go to the validation split.
//     Writes DIR/train.u16 and DIR/val.u16 (little-endian uint16 token ids), which the Composer side reads too.
//   lm_recipe train --tokens DIR --config baseline|recipe|NAME,NAME... [--target 6.0] [--max-batches 1500]
//       [--eval-every 50] [--seed 1]
//     Trains a small GPT-2 (2 layers, d_model 128, 4 heads, sequences of 128 tokens, batch 16, DecoupledAdamW 2e-3
//     with 50 warmup batches and cosine decay over max-batches) until the validation cross entropy (16 fixed
//     batches of the validation split, evaluated every eval-every batches, evaluation time excluded) reaches
//     target. "recipe" is kRecipe below (Alibi with training sequences a quarter of the length, GradientClipping
//     at norm 1.0, EMA with a half-life of 50 batches); a comma-separated list of config names runs those methods
//     (settings in make_method()). Prints EVAL lines (batches, training seconds, validation cross entropy at each
//     evaluation) and RESULT lm_recipe side=ours config=... reached=0|1 batches=N train_s=T val_ce=V.
#include "composer/composer.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace composer;

namespace {

constexpr int64_t kSeqLen = 128, kBatch = 16, kEvalBatches = 16;

void write_u16(const std::string& path, const std::vector<int64_t>& ids) {
  std::vector<uint16_t> out(ids.begin(), ids.end());
  std::ofstream f(path + ".part", std::ios::binary);
  f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size() * sizeof(uint16_t)));
  f.close();
  if (!f) throw std::runtime_error("cannot write " + path);
  std::rename((path + ".part").c_str(), path.c_str());
}

at::Tensor read_u16(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw std::runtime_error("cannot read " + path + " (run lm_recipe tokenize first)");
  const auto bytes = static_cast<int64_t>(f.tellg());
  std::vector<uint16_t> ids(static_cast<size_t>(bytes / 2));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(ids.data()), bytes);
  at::Tensor t = at::empty({static_cast<int64_t>(ids.size())}, at::kLong);
  auto* p = t.data_ptr<int64_t>();
  for (size_t i = 0; i < ids.size(); ++i) p[i] = ids[i];
  return t;
}

int tokenize(const std::string& out, const std::string& texts, const std::string& mobydick, const std::string& vocab) {
  std::filesystem::create_directories(out);
  const auto tok = Gpt2Tokenizer::from_dir(vocab);
  std::vector<int64_t> train, val;
  for (const std::string path : {mobydick, texts + "/poe.txt", texts + "/huckfinn.txt", texts + "/kjv.txt"}) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<int64_t> ids = tok.encode(load_gutenberg_text(path));
    ids.push_back(tok.eot_token());
    const auto cut = static_cast<size_t>(static_cast<double>(ids.size()) * 0.98);
    train.insert(train.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(cut));
    val.insert(val.end(), ids.begin() + static_cast<std::ptrdiff_t>(cut), ids.end());
    std::printf("tokenized %s: %zu tokens in %.1f s\n", path.c_str(), ids.size(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  write_u16(out + "/train.u16", train);
  write_u16(out + "/val.u16", val);
  std::printf("RESULT lm_recipe tokens train=%zu val=%zu\n", train.size(), val.size());
  return 0;
}

// The recipe, and each method's settings in it.
constexpr const char* kRecipe = "alibi,gradient_clipping,ema";

std::shared_ptr<Algorithm> make_method(const std::string& name) {
  if (name == "alibi")  // trained on sequences of 32 tokens, four times as many rows
    return algorithms::make_algorithm(
        "alibi", {{"max_sequence_length", std::to_string(kSeqLen)}, {"train_sequence_length_scaling", "0.25"}});
  if (name == "seq_length_warmup")
    return algorithms::make_algorithm(
        "seq_length_warmup",
        {{"duration", "0.3"}, {"min_seq_length", "8"}, {"max_seq_length", std::to_string(kSeqLen)}});
  if (name == "seq_length_warmup_short")  // to Alibi's training length, 32 tokens
    return algorithms::make_algorithm(
        "seq_length_warmup",
        {{"duration", "0.3"}, {"min_seq_length", "8"}, {"max_seq_length", std::to_string(kSeqLen / 4)}});
  if (name == "gradient_clipping")
    return algorithms::make_algorithm("gradient_clipping", {{"clipping_type", "norm"}, {"clipping_threshold", "1.0"}});
  if (name == "ema") return algorithms::make_algorithm("ema", {{"half_life", "50ba"}});
  return algorithms::make_algorithm(name);
}

// Both Trainers update training metrics on every microbatch's outputs (a cross entropy over the 50257-way logits
// here), so the benchmark model has evaluation metrics only, like Composer's run (HuggingFaceModel(metrics=None)).
class EvalMetricsOnly : public ComposerLanguageModel {
 public:
  using ComposerLanguageModel::ComposerLanguageModel;
  MetricMap get_metrics(bool is_train) override {
    return is_train ? MetricMap{} : ComposerLanguageModel::get_metrics(false);
  }
};

// One line per evaluation: the training time (evaluation excluded) at which each validation loss was reached.
class EvalPrinter : public Callback {
 public:
  explicit EvalPrinter(std::string config) : config_(std::move(config)) {}
  void eval_end(State& state, Logger&) override {
    std::printf("EVAL lm_recipe side=ours config=%s batches=%lld train_s=%.2f val_ce=%.4f\n", config_.c_str(),
                static_cast<long long>(state.timestamp.batch), state.timestamp.total_wct.count(),
                state.eval_metric_values.at("LanguageCrossEntropy"));
    std::fflush(stdout);
  }

 private:
  std::string config_;
};

int train(const std::string& dir, const std::string& config, double target, int64_t max_batches, int64_t eval_every,
          uint64_t seed) {
  const at::Tensor train_tokens = read_u16(dir + "/train.u16"), val_tokens = read_u16(dir + "/val.u16");
  auto train_loader = std::make_shared<DatasetLoader>(make_lm_dataset(train_tokens, kSeqLen),
                                                      DatasetLoaderOptions(kBatch).shuffle(true).seed(seed));
  auto val_loader =
      std::make_shared<DatasetLoader>(make_lm_dataset(val_tokens, kSeqLen), DatasetLoaderOptions(32).shuffle(false));
  torch::manual_seed(seed);
  auto model = std::make_shared<EvalMetricsOnly>(std::make_shared<models::GPT>(
      models::TransformerConfig().vocab_size(50257).max_seq_len(kSeqLen).n_layer(2).n_head(4).d_model(128)));
  std::vector<std::shared_ptr<Algorithm>> algos;
  if (config != "baseline") {
    std::stringstream names(config == "recipe" ? std::string(kRecipe) : config);
    for (std::string name; std::getline(names, name, ',');) algos.push_back(make_method(name));
  }
  auto opt = std::make_shared<optim::DecoupledAdamW>(model->parameters(),
                                                     optim::DecoupledAdamWOptions(2e-3).weight_decay(0.0));
  auto stopper = std::make_shared<ThresholdStopper>("LanguageCrossEntropy", "eval", target,
                                                    [](double value, double threshold) { return value <= threshold; });
  Trainer trainer(TrainerOptions(model)
                      .train_dataloader(train_loader)
                      .eval_dataloader(val_loader)
                      .eval_subset_num_batches(kEvalBatches)
                      .eval_interval(Time::from_batch(eval_every))
                      .optimizer(opt)
                      .algorithms(algos)
                      .schedulers({std::make_shared<CosineAnnealingWithWarmupScheduler>(Time::from_batch(50))})
                      .max_duration(Time::from_batch(max_batches))
                      .callbacks({stopper, std::make_shared<EvalPrinter>(config)})
                      .progress_bar(false)
                      .device("cpu")
                      .precision(Precision::FP32)
                      .seed(seed));
  trainer.fit();
  const State& s = trainer.state();
  const double ce = s.eval_metric_values.at("LanguageCrossEntropy");
  std::printf(
      "RESULT lm_recipe side=ours config=%s seed=%llu target=%.3f reached=%d batches=%lld train_s=%.2f "
      "val_ce=%.4f\n",
      config.c_str(), static_cast<unsigned long long>(seed), target, ce <= target ? 1 : 0,
      static_cast<long long>(s.timestamp.batch), s.timestamp.total_wct.count(), ce);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: lm_recipe tokenize|train [options]\n");
    return 2;
  }
  const std::string mode = argv[1];
  std::string out, tokens, config = "baseline", texts = "data/texts", mobydick = "data/text/mobydick.txt",
                           vocab = "data/gpt2";
  double target = 6.0;
  int64_t max_batches = 1500, eval_every = 50;
  uint64_t seed = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--out")
      out = v;
    else if (a == "--tokens")
      tokens = v;
    else if (a == "--config")
      config = v;
    else if (a == "--texts")
      texts = v;
    else if (a == "--mobydick")
      mobydick = v;
    else if (a == "--vocab")
      vocab = v;
    else if (a == "--target")
      target = std::stod(v);
    else if (a == "--max-batches")
      max_batches = std::stoll(v);
    else if (a == "--eval-every")
      eval_every = std::stoll(v);
    else if (a == "--seed")
      seed = std::stoull(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  try {
    configure_threads();
    if (mode == "tokenize") return tokenize(out, texts, mobydick, vocab);
    if (mode == "train") return train(tokens, config, target, max_batches, eval_every, seed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lm_recipe: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "unknown mode %s (tokenize or train)\n", mode.c_str());
  return 2;
}
