// Fine-tuning SmolLM2-135M-Instruct with our Trainer, the side of bench/finetune.sh that runs beside Composer's
// (bench/peers/composer_finetune.py) on the same weights, windows, optimizer and adapters.
//   finetune prepare --gguf FILE --text FILE --seq L --windows N --out FILE   the windows [N, L] in the model's tokens
//   finetune train --gguf FILE --windows FILE --mode full|lora [--adapters DIR] --steps S --batch B --lr LR
//       prints "STEP i loss seconds" per batch (the loss over the L - 1 next tokens of each window, as Hugging Face's
//       shifted loss is) and a RESULT line
//   finetune generate --gguf FILE --prompt-ids FILE --new N --rounds R   prints tokens per second of greedy generation
#include "composer/composer.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <string>

using namespace composer;

namespace {

std::map<std::string, std::string> parse(int argc, char** argv, int first) {
  std::map<std::string, std::string> args;
  for (int i = first; i + 1 < argc; i += 2) args[std::string(argv[i]).substr(2)] = argv[i + 1];
  return args;
}

at::Tensor read_tensor(const std::string& path, const std::string& name) {
  for (auto& [key, t] : read_safetensors(path))
    if (key == name) return t;
  throw std::runtime_error(path + " has no tensor " + name);
}

int prepare(std::map<std::string, std::string> a) {
  const auto tok = BpeTokenizer::from_gguf(a.at("gguf"));
  const auto ids = tok->encode(load_gutenberg_text(a.at("text")));
  const int64_t seq = std::stoll(a.at("seq")), n = std::stoll(a.at("windows"));
  if (static_cast<int64_t>(ids.size()) < n * seq) throw std::runtime_error("the text is too short");
  const at::Tensor windows = at::tensor(ids, at::kLong).narrow(0, 0, n * seq).view({n, seq}).contiguous();
  write_safetensors(a.at("out"), {{"input_ids", windows}});
  std::printf("RESULT prepare tokens=%zu windows=%lld\n", ids.size(), static_cast<long long>(n));
  return 0;
}

// Loss and wall time of every batch, from one BATCH_END to the next.
class StepClock : public Callback {
 public:
  void fit_start(State&, Logger&) override { last_ = std::chrono::steady_clock::now(); }
  void batch_end(State& state, Logger&) override {
    const auto now = std::chrono::steady_clock::now();
    std::printf("STEP %lld %.8f %.4f\n", static_cast<long long>(state.timestamp.batch), state.loss.item<double>(),
                std::chrono::duration<double>(now - last_).count());
    std::fflush(stdout);
    last_ = now;
  }

 private:
  std::chrono::steady_clock::time_point last_;
};

int train(std::map<std::string, std::string> a) {
  at::set_num_threads(2);
  const auto load_start = std::chrono::steady_clock::now();
  auto llama = models::load_llama_gguf(a.at("gguf"));
  const bool lora = a.at("mode") == "lora";
  if (lora) models::load_lora_adapters(*llama, a.at("adapters"));  // the adapters PEFT initialised, B = 0
  auto model = std::make_shared<ComposerLanguageModel>(llama);
  // Hugging Face's loss: position t predicts token t + 1 of the same window, the last position predicts nothing.
  const at::Tensor ids = read_tensor(a.at("windows"), "input_ids");
  const at::Tensor labels =
      at::cat({ids.narrow(1, 1, ids.size(1) - 1), at::full({ids.size(0), 1}, -100, at::kLong)}, 1);
  auto loader = std::make_shared<TensorDataLoader>(Batch({{"input_ids", ids}, {"labels", labels}}),
                                                   TensorDataLoaderOptions(std::stoll(a.at("batch"))));
  std::vector<at::Tensor> trainable;
  for (const auto& p : model->parameters())
    if (p.requires_grad()) trainable.push_back(p);
  auto opt = std::make_shared<optim::DecoupledAdamW>(
      trainable, optim::DecoupledAdamWOptions(std::stod(a.at("lr"))).weight_decay(0.0));
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  Trainer trainer(TrainerOptions(model)
                      .train_dataloader(loader)
                      .optimizer(opt)
                      .max_duration(Time::from_batch(std::stoll(a.at("steps"))))
                      .callbacks({std::make_shared<StepClock>()})
                      .progress_bar(false)
                      .seed(17));
  trainer.fit();
  std::printf("RESULT ours mode=%s load_s=%.2f\n", a.at("mode").c_str(), load_s);
  return 0;
}

int generate(std::map<std::string, std::string> a) {
  at::set_num_threads(2);
  auto llama = models::load_llama_gguf(a.at("gguf"));
  const at::Tensor prompt = read_tensor(a.at("prompt-ids"), "input_ids");
  const int64_t n = std::stoll(a.at("new"));
  for (int64_t r = 0; r < std::stoll(a.at("rounds")); ++r) {
    const auto start = std::chrono::steady_clock::now();
    const at::Tensor out = models::generate_tokens(*llama, prompt, models::GenerationOptions().max_new_tokens(n));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("GENERATE ours round=%lld tokens=%lld seconds=%.4f tokens_per_s=%.2f last=%lld\n",
                static_cast<long long>(r), static_cast<long long>(n), s, static_cast<double>(n) / s,
                static_cast<long long>(out[0][-1].item<int64_t>()));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: finetune prepare|train|generate --key value ...\n");
    return 2;
  }
  const std::string cmd = argv[1];
  const auto args = parse(argc, argv, 2);
  if (cmd == "prepare") return prepare(args);
  if (cmd == "train") return train(args);
  if (cmd == "generate") return generate(args);
  std::fprintf(stderr, "finetune: unknown command %s\n", cmd.c_str());
  return 2;
}
