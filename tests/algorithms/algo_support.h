// Fixtures for the algorithm tests: a tiny conv net that has every layer surgery targets, and image data.
#pragma once

#include "support/test_support.h"

namespace composer::testing {

/// conv(3->16) BN ReLU, strided conv(16->16) BN ReLU, ResNetBottleneck(16 -> 16), MaxPool, GlobalAvgPool, Linear.
/// Input [N, 3, 16, 16].
inline std::shared_ptr<nn::Sequential> tiny_convnet(uint64_t seed = 0, int64_t classes = 10) {
  torch::manual_seed(seed);
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(3, 16, 3).padding(1).bias(false)));
  seq->push_back(std::make_shared<nn::BatchNorm2d>(16));
  seq->push_back(std::make_shared<nn::ReLU>());
  seq->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(16, 16, 3).stride(2).padding(1).bias(false)));
  seq->push_back(std::make_shared<nn::BatchNorm2d>(16));
  seq->push_back(std::make_shared<nn::ReLU>());
  seq->push_back(std::make_shared<models::ResNetBottleneck>(16, 4, 1));
  seq->push_back(std::make_shared<nn::MaxPool2d>(2, 2));
  seq->push_back(std::make_shared<nn::GlobalAvgPool>());
  seq->push_back(std::make_shared<nn::Linear>(16, classes));
  return seq;
}

/// uint8 images [n, 3, 16, 16] whose class (of 10) depends on the mean colour, as a Dataset.
inline std::shared_ptr<TensorDataset> tiny_images(int64_t n = 128, uint64_t seed = 3) {
  auto gen = at::detail::createCPUGenerator(seed);
  const at::Tensor x = at::randint(0, 256, {n, 3, 16, 16}, gen, at::TensorOptions().dtype(at::kByte));
  const at::Tensor y = (x.to(at::kFloat).mean({1, 2, 3}) * 7).to(at::kLong).remainder(10);
  return std::make_shared<TensorDataset>(Batch(x, y));
}

/// A DatasetLoader over tiny_images that normalizes the uint8 images.
inline std::shared_ptr<DatasetLoader> tiny_image_loader(int64_t batch_size = 32, int64_t n = 128) {
  return std::make_shared<DatasetLoader>(
      tiny_images(n),
      DatasetLoaderOptions(batch_size)
          .shuffle(false)
          .num_workers(0)
          .transform(make_image_transform(ImageTransformOptions().mean({0.5, 0.5, 0.5}).std({0.25, 0.25, 0.25}))));
}

/// Whether a registered algorithm works on token batches (input_ids, labels) and a language model.
inline bool is_language_algorithm(const std::string& name) {
  return name == "seq_length_warmup" || name == "alibi" || name == "gated_linear_units";
}

/// A tiny GPT (vocab 17, 2 layers, d_model 16, sequences up to 32) as a ComposerLanguageModel.
inline std::shared_ptr<ComposerModel> tiny_gpt(uint64_t seed = 0) {
  torch::manual_seed(seed);
  return std::make_shared<ComposerLanguageModel>(std::make_shared<models::GPT>(
      models::TransformerConfig().vocab_size(17).max_seq_len(32).n_layer(2).n_head(2).d_model(16)));
}

/// Token batches: input_ids [n, 32] and labels (the next token), from a fixed generator.
inline std::shared_ptr<TensorDataLoader> tiny_token_loader(int64_t batch_size = 8, int64_t n = 32) {
  auto gen = at::detail::createCPUGenerator(9);
  const at::Tensor tokens = at::randint(0, 17, {n, 33}, gen, at::TensorOptions().dtype(at::kLong));
  Batch data({{"input_ids", tokens.narrow(1, 0, 32).contiguous()}, {"labels", tokens.narrow(1, 1, 32).contiguous()}});
  return std::make_shared<TensorDataLoader>(std::move(data), TensorDataLoaderOptions(batch_size));
}

/// The config names of every registered algorithm, for parameterised suites.
inline std::vector<std::string> registered_algorithms() {
  std::vector<std::string> names;
  for (const auto& e : algorithms::algorithm_registry().entries()) names.push_back(e.name);
  return names;
}

/// Hyperparameters for the algorithms whose arguments are required (Composer has no defaults for them) or whose
/// defaults do not fit a tiny run; the others are built with none, from their defaults.
inline std::map<std::string, std::string> example_hparams(const std::string& name) {
  if (name == "gradient_clipping") return {{"clipping_type", "norm"}, {"clipping_threshold", "0.5"}};
  if (name == "alibi") return {{"max_sequence_length", "64"}};
  // Composer's defaults (8 to 1024 over 30 % of the run) need a run of at least 424 batches; a tiny run warms 8 -> 16.
  if (name == "seq_length_warmup")
    return {{"min_seq_length", "8"}, {"max_seq_length", "16"}, {"step_size", "8"}, {"duration", "1"}};
  return {};
}

/// A registered algorithm built from example_hparams(name).
inline std::shared_ptr<Algorithm> make_example(const std::string& name) {
  return algorithms::make_algorithm(name, example_hparams(name));
}

}  // namespace composer::testing
