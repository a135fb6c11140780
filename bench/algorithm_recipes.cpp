// bench/algorithm_recipes: what the speed-up algorithms buy on Fashion-MNIST on this machine.
//
//   algorithm_recipes screen --methods baseline,blurpool,... [--epochs 2] [--seed 0]
//     One run per method, a fixed budget each: training step time (train time / batches, evaluation excluded) and
//     the test accuracy at the end, each compared with the baseline measured in the same invocation.
//   algorithm_recipes tta --recipe label_smoothing,progressive_resizing --seeds 1,2,3 [--target 0.90] [--max-epochs 4]
//     Wall time to a test accuracy (evaluated every --eval-every batches, evaluation time excluded): baseline and
//     recipe alternately for each seed (--baseline 0: the recipe only, for trying recipes on a screening seed).
//
// The model is a small ResNet for 28x28 inputs (stem conv 1->24, BasicBlock 24->32 stride 2, BasicBlock 32->64
// stride 2, global average pool, linear), so every method applies (sizes may change; strided convs and residual
// blocks exist). Hyperparameters are Composer's defaults except where a default cannot apply at this width
// (see method_hparams()). Two variants give methods something to act on: a dropout layer (gyro_dropout,
// dropout_baseline) and GroupNorm at amp_bf16 (low_precision_groupnorm, groupnorm_bf16_baseline); --max-batches N
// caps every run (bfloat16 is slow on CPUs without native bfloat16 arithmetic).
#include "composer/composer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

using namespace composer;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// The model variants some methods need to have an effect at all: a Dropout(0.5) before the classifier
// (GyroDropout replaces it; compare with "dropout_baseline") and GroupNorm(8 groups) in place of the stem's BatchNorm
// at amp_bf16 (LowPrecisionGroupNorm; compare with "groupnorm_bf16_baseline").
struct Variant {
  bool dropout = false, group_norm = false;
};

Variant variant_of(const std::vector<std::string>& methods) {
  Variant v;
  for (const auto& m : methods) {
    v.dropout |= m == "gyro_dropout" || m == "dropout_baseline";
    v.group_norm |= m == "low_precision_groupnorm" || m == "groupnorm_bf16_baseline";
  }
  return v;
}

bool is_baseline(const std::string& m) {
  return m == "baseline" || (m.size() > 9 && m.rfind("_baseline") == m.size() - 9);
}

std::shared_ptr<nn::Sequential> small_resnet(const Variant& v = {}) {
  auto net = std::make_shared<nn::Sequential>();
  net->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(1, 24, 3).padding(1).bias(false)));
  if (v.group_norm)
    net->push_back(std::make_shared<nn::GroupNorm>(8, 24));
  else
    net->push_back(std::make_shared<nn::BatchNorm2d>(24));
  net->push_back(std::make_shared<nn::ReLU>());
  net->push_back(std::make_shared<models::BasicBlock>(24, 32, 2));
  net->push_back(std::make_shared<models::BasicBlock>(32, 64, 2));
  net->push_back(std::make_shared<nn::GlobalAvgPool>());
  if (v.dropout) net->push_back(std::make_shared<nn::Dropout>(0.5));
  net->push_back(std::make_shared<nn::Linear>(64, 10));
  return net;
}

// Composer's defaults, except the channel thresholds sized for 1000-channel ImageNet models (SqueezeExcite 128,
// Factorize 256) and StochasticDepth's target, which must be this model's block type.
std::map<std::string, std::string> method_hparams(const std::string& name) {
  if (name == "squeeze_excite") return {{"min_channels", "32"}, {"latent_channels", "0.25"}};
  if (name == "factorize") return {{"min_channels", "32"}, {"latent_channels", "0.25"}, {"factorize_linears", "false"}};
  if (name == "stochastic_depth") return {{"target_layer_name", "BasicBlock"}};
  if (name == "gradient_clipping") return {{"clipping_type", "norm"}, {"clipping_threshold", "1.0"}};
  // A 1000-batch half life averages over more than the 938 batches of two epochs; freezing from 0.5 of training at
  // EPOCH_END would first act at the very end of a 2-epoch run.
  if (name == "ema") return {{"half_life", "100ba"}};
  if (name == "layer_freezing") return {{"freeze_start", "0.0"}};
  // Averaging once per epoch would start and end at the last EPOCH_END of a 2-epoch run.
  if (name == "swa") return {{"update_interval", "10ba"}};
  // Groups of 16 of 64 preselected masks: 4 groups, each for a quarter of the run.
  if (name == "gyro_dropout") return {{"sigma", "64"}, {"tau", "16"}};
  return {};
}

struct Outcome {
  double acc = 0, train_s = 0, total_s = 0;
  int64_t batches = 0;
};

struct Setup {
  std::string data = "data/fashion-mnist";
  int64_t workers = 2;
  int64_t max_batches = 0;  // > 0: stop there (slow precisions)
};

// max_duration is given in batches (epochs x loader length): algorithms that follow the elapsed fraction of
// training (ProgressiveResizing) read it in max_duration's unit, so in epochs they would step once per epoch.
Outcome run(const Setup& setup, const std::vector<std::string>& methods, uint64_t seed, int64_t epochs,
            int64_t eval_every, double target) {
  const auto normalize = make_image_transform(ImageTransformOptions().mean({0.2860}).std({0.3530}));
  auto train = std::make_shared<DatasetLoader>(
      load_mnist(setup.data, true),
      DatasetLoaderOptions(128).shuffle(true).seed(seed).num_workers(setup.workers).transform(normalize));
  auto test = std::make_shared<DatasetLoader>(
      load_mnist(setup.data, false),
      DatasetLoaderOptions(1000).shuffle(false).num_workers(setup.workers).transform(normalize));
  const int64_t batches =
      setup.max_batches > 0 ? std::min(setup.max_batches, epochs * *train->length()) : epochs * *train->length();
  const Time duration = Time::from_batch(batches);
  const Variant variant = variant_of(methods);
  torch::manual_seed(seed);
  auto model = ComposerClassifier::wrap(small_resnet(variant));
  std::vector<std::shared_ptr<Algorithm>> algos;
  for (const auto& m : methods)
    if (!is_baseline(m)) algos.push_back(algorithms::make_algorithm(m, method_hparams(m)));
  auto opt = std::make_shared<optim::DecoupledSGDW>(model->parameters(),
                                                    optim::DecoupledSGDWOptions(0.1).momentum(0.9).weight_decay(5e-4));
  // NoOpModel times the Trainer alone; its stand-in model evaluates BinaryAccuracy, which ten classes are not.
  const bool no_op = std::find(methods.begin(), methods.end(), "no_op_model") != methods.end();
  std::vector<std::shared_ptr<Callback>> callbacks;
  if (target > 0) callbacks.push_back(std::make_shared<ThresholdStopper>("Accuracy", "eval", target));
  const auto start = std::chrono::steady_clock::now();
  TrainerOptions options(model);
  if (!no_op) options.eval_dataloader(test);
  Trainer trainer(options.train_dataloader(train)
                      .optimizer(opt)
                      .algorithms(algos)
                      .schedulers({std::make_shared<CosineAnnealingWithWarmupScheduler>(Time::from_batch(100))})
                      .max_duration(duration)
                      .eval_interval(eval_every > 0 ? Time::from_batch(eval_every) : duration)
                      .progress_bar(false)
                      .device("cpu")
                      .precision(variant.group_norm ? Precision::AMP_BF16 : Precision::FP32)
                      .seed(seed)
                      .callbacks(callbacks));
  trainer.fit();
  Outcome o;
  const State& s = trainer.state();
  o.total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  o.acc = no_op ? std::nan("") : s.eval_metric_values.at("Accuracy");
  o.train_s = s.timestamp.total_wct.count();
  o.batches = s.timestamp.batch;
  return o;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "+") + x;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: algorithm_recipes screen|tta [options]\n");
    return 2;
  }
  const std::string mode = argv[1];
  Setup setup;
  std::string methods = "baseline", recipe, seeds = "1,2,3";
  int64_t epochs = 2, max_epochs = 4, eval_every = 50, seed = 0;
  double target = 0.90;
  bool with_baseline = true;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--data")
      setup.data = v;
    else if (a == "--methods")
      methods = v;
    else if (a == "--recipe")
      recipe = v;
    else if (a == "--seeds")
      seeds = v;
    else if (a == "--seed")
      seed = std::stoll(v);
    else if (a == "--epochs")
      epochs = std::stoll(v);
    else if (a == "--max-epochs")
      max_epochs = std::stoll(v);
    else if (a == "--eval-every")
      eval_every = std::stoll(v);
    else if (a == "--target")
      target = std::stod(v);
    else if (a == "--max-batches")
      setup.max_batches = std::stoll(v);
    else if (a == "--workers")
      setup.workers = std::stoll(v);
    else if (a == "--baseline")
      with_baseline = v != "0";
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  configure_threads();
  if (mode == "screen") {
    for (const auto& m : split(methods)) {
      const Outcome o = run(setup, {m}, static_cast<uint64_t>(seed), epochs, 0, 0);
      std::printf(
          "RESULT screen method=%s seed=%lld epochs=%lld acc=%.4f batches=%lld train_s=%.2f step_ms=%.2f "
          "total_s=%.2f\n",
          m.c_str(), static_cast<long long>(seed), static_cast<long long>(epochs), o.acc,
          static_cast<long long>(o.batches), o.train_s, 1000.0 * o.train_s / static_cast<double>(o.batches), o.total_s);
      std::fflush(stdout);
    }
    return 0;
  }
  if (mode == "tta") {
    const std::vector<std::string> rec = split(recipe);
    int k = 0;
    for (const auto& sd : split(seeds)) {
      const uint64_t s = std::stoull(sd);
      std::vector<std::vector<std::string>> order{{"baseline"}, rec};
      if (k++ % 2 == 1) std::swap(order[0], order[1]);  // alternate which runs first: this machine's speed drifts
      if (!with_baseline) order = {rec};
      for (const auto& config : order) {
        const Outcome o = run(setup, config, s, max_epochs, eval_every, target);
        std::printf(
            "RESULT tta config=%s seed=%llu target=%.4f reached=%d acc=%.4f batches=%lld train_s=%.2f total_s=%.2f\n",
            joined(config).c_str(), static_cast<unsigned long long>(s), target, o.acc >= target ? 1 : 0, o.acc,
            static_cast<long long>(o.batches), o.train_s, o.total_s);
        std::fflush(stdout);
      }
    }
    return 0;
  }
  std::fprintf(stderr, "unknown mode %s (screen or tta)\n", mode.c_str());
  return 2;
}
