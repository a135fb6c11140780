// bench/checkpoint_io: save/load time and size of full checkpoints (model + DecoupledAdamW moments + the rest of the
// State) for ResNet-50 and GPT-2 124M, against torch::save / torch::load of the same tensors, in one run.
//   checkpoint_io [--dir /tmp] [--repeats 3]
#include "composer/composer.h"

#include <torch/serialize.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

using namespace composer;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Row {
  std::string model;
  double bytes, save_s, load_s, ref_bytes, ref_save_s, ref_load_s;
};

Row measure(const std::string& name, std::shared_ptr<ComposerModel> model, const Batch& batch, const std::string& dir,
            int repeats) {
  auto opt = std::make_shared<optim::DecoupledAdamW>(model->parameters(), optim::DecoupledAdamWOptions(1e-4));
  Trainer trainer(
      TrainerOptions(model)
          .train_dataloader(std::make_shared<TensorDataLoader>(batch, TensorDataLoaderOptions(batch.num_samples())))
          .optimizer(opt)
          .max_duration("1ba")
          .progress_bar(false)
          .device("cpu")
          .seed(0));
  trainer.fit();  // one step, so the optimizer holds its moments
  const std::string ckpt = dir + "/" + name + ".pt", ref = dir + "/" + name + "-torch-save.pt";
  std::vector<at::Tensor> tensors;  // the same tensors, for the reference
  for (const auto& p : model->parameters()) tensors.push_back(p.detach());
  for (const auto& b : model->buffers()) tensors.push_back(b);
  const Dict opt_state = opt->state_dict().toGenericDict().at("state").toGenericDict();
  for (const auto& e : opt_state)
    for (const auto& f : e.value().toGenericDict())
      if (f.value().isTensor()) tensors.push_back(f.value().toTensor());
  Row r{name, 0, 1e30, 1e30, 0, 1e30, 1e30};
  for (int i = 0; i < repeats; ++i) {
    auto t = Clock::now();
    save_checkpoint(trainer.state(), ckpt);
    r.save_s = std::min(r.save_s, seconds_since(t));
    t = Clock::now();
    apply_checkpoint(trainer.state(), read_checkpoint(ckpt), {}, ckpt);
    r.load_s = std::min(r.load_s, seconds_since(t));
    t = Clock::now();
    torch::save(tensors, ref);
    r.ref_save_s = std::min(r.ref_save_s, seconds_since(t));
    t = Clock::now();
    std::vector<at::Tensor> back;
    torch::load(back, ref);
    r.ref_load_s = std::min(r.ref_load_s, seconds_since(t));
  }
  r.bytes = static_cast<double>(std::filesystem::file_size(ckpt));
  r.ref_bytes = static_cast<double>(std::filesystem::file_size(ref));
  std::filesystem::remove(ckpt);
  std::filesystem::remove(ref);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::filesystem::temp_directory_path().string();
  int repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--repeats"))
      repeats = std::atoi(argv[i + 1]);
  }
  configure_threads();
  std::vector<Row> rows;
  torch::manual_seed(0);
  rows.push_back(measure("resnet50", ComposerClassifier::wrap(models::resnet(50, 1000)),
                         Batch(at::randn({2, 3, 64, 64}), at::randint(1000, {2}, at::TensorOptions().dtype(at::kLong))),
                         dir, repeats));
  auto gpt = std::make_shared<models::GPT>(models::TransformerConfig());  // GPT-2 124M
  const at::Tensor ids = at::randint(50257, {1, 16}, at::TensorOptions().dtype(at::kLong));
  rows.push_back(measure("gpt2-124m", std::make_shared<ComposerLanguageModel>(gpt),
                         Batch({{"input_ids", ids}, {"labels", ids}}), dir, repeats));
  std::printf(
      "| model | checkpoint MB | save s | save MB/s | load s | load MB/s | torch::save MB | torch::save MB/s | "
      "torch::load MB/s | save ratio | load ratio |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : rows) {
    const double mb = r.bytes / 1e6, ref_mb = r.ref_bytes / 1e6;
    std::printf("| %s | %.1f | %.2f | %.0f | %.2f | %.0f | %.1f | %.0f | %.0f | %.2f | %.2f |\n", r.model.c_str(), mb,
                r.save_s, mb / r.save_s, r.load_s, mb / r.load_s, ref_mb, ref_mb / r.ref_save_s, ref_mb / r.ref_load_s,
                (mb / r.save_s) / (ref_mb / r.ref_save_s), (mb / r.load_s) / (ref_mb / r.ref_load_s));
  }
  std::printf("RESULT checkpoint_io save_throughput_ratio_resnet50=%.2f save_throughput_ratio_gpt2=%.2f\n",
              (rows[0].bytes / rows[0].save_s) / (rows[0].ref_bytes / rows[0].ref_save_s),
              (rows[1].bytes / rows[1].save_s) / (rows[1].ref_bytes / rows[1].ref_save_s));
  return 0;
}
