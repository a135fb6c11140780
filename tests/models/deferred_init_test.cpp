// nn::DeferredInit: models built without their weights draw, when materialized, bitwise what a normal build draws,
// unit by unit, and what a record cannot reproduce is refused. (FSDP's use of it, on real processes: dist_test.)
#include "composer/composer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include <unistd.h>

namespace composer {
namespace {

models::LlamaConfig llama_config(int64_t layers) {
  return models::LlamaConfig()
      .vocab_size(96)
      .hidden_size(32)
      .intermediate_size(72)
      .num_hidden_layers(layers)
      .num_attention_heads(4)
      .num_key_value_heads(2)
      .max_position_embeddings(32);
}

at::Tensor generator_state() { return at::detail::getDefaultCPUGenerator().get_state(); }

// Builds `make()` after seeding 5, normally and under a DeferredInit; checks that the deferred one holds no values,
// that materializing it leaves the generator where it was, and that it then equals the normal one bitwise.
template <class Make>
void expect_same_as_normal_build(Make make) {
  torch::manual_seed(5);
  auto normal = make();
  torch::manual_seed(5);
  const at::Tensor before = generator_state();
  decltype(make()) deferred;
  {
    nn::DeferredInit recording;
    deferred = make();
  }
  EXPECT_TRUE(at::equal(generator_state(), before)) << "recording drew nothing";
  ASSERT_TRUE(nn::has_deferred_parameters(*deferred));
  for (const auto& p : deferred->named_parameters()) {
    EXPECT_TRUE(nn::is_deferred(p.value())) << p.key();
    EXPECT_EQ(p.value().storage().nbytes(), static_cast<size_t>(p.value().element_size())) << p.key();
  }
  const at::Tensor later = at::randn({3});  // moves the generator: materializing must put it back
  const at::Tensor now = generator_state();
  nn::materialize(*deferred);
  EXPECT_TRUE(at::equal(generator_state(), now));
  EXPECT_FALSE(nn::has_deferred_parameters(*deferred));
  const auto a = normal->named_parameters(), b = deferred->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].key(), b[i].key());
    EXPECT_EQ(b[i].value().requires_grad(), a[i].value().requires_grad()) << b[i].key();
    EXPECT_TRUE(at::equal(a[i].value(), b[i].value())) << a[i].key();
  }
}

TEST(DeferredInitTest, ModelsDrawBitwiseWhatANormalBuildDraws) {
  expect_same_as_normal_build([] { return std::make_shared<models::Llama>(llama_config(3)); });
  expect_same_as_normal_build(
      [] { return std::make_shared<models::Llama>(llama_config(2).tie_word_embeddings(false).attention_bias(true)); });
  expect_same_as_normal_build([] {
    return std::make_shared<models::GPT>(
        models::TransformerConfig().vocab_size(80).max_seq_len(16).n_layer(2).n_head(2).d_model(16));
  });
  expect_same_as_normal_build([] {  // LoRA adapters on a deferred model (init_device: meta with model.lora)
    auto llama = std::make_shared<models::Llama>(llama_config(2));
    models::apply_lora(*llama, models::LoraOptions().r(4).target_modules({"q_proj", "v_proj", "down_proj"}));
    return llama;
  });
  expect_same_as_normal_build([] {  // every composer::nn layer with parameters
    auto seq = std::make_shared<nn::Sequential>();
    seq->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(3, 4, 3).padding(1)));
    seq->push_back(std::make_shared<nn::BatchNorm2d>(4));
    seq->push_back(std::make_shared<nn::GroupNorm>(2, 4));
    seq->push_back(std::make_shared<nn::Embedding>(10, 4, 0.5));
    seq->push_back(std::make_shared<nn::LayerNorm>(4));
    seq->push_back(std::make_shared<nn::RMSNorm>(4));
    seq->push_back(std::make_shared<nn::Linear>(4, 6));
    return seq;
  });
}

// FSDP's use: each unit handed over as soon as its parameters hold values, so that the caller shards and frees it
// before the next one is drawn.
// (Tied embeddings, as SmolLM2: an untied lm_head, drawn last, keeps the root unit, and so the embedding drawn first,
// waiting until the end.)
TEST(DeferredInitTest, UnitsAreReadyAsSoonAsTheirParametersAreDrawn) {
  const auto config = llama_config(4).tie_word_embeddings(true);
  torch::manual_seed(8);
  const auto normal = std::make_shared<models::Llama>(config);
  torch::manual_seed(8);
  std::shared_ptr<models::Llama> llama;
  {
    nn::DeferredInit recording;
    llama = std::make_shared<models::Llama>(config);
  }
  // The units as FSDP plans them: each decoder layer, and the root (the embedding and the last norm).
  std::vector<std::vector<at::Tensor>> units;
  std::set<const c10::TensorImpl*> in_layers;
  for (const auto& m : llama->named_modules("", false)) {
    if (!dynamic_cast<models::LlamaDecoderLayer*>(m.value().get())) continue;
    units.push_back(m.value()->parameters());
    for (const auto& p : units.back()) in_layers.insert(p.unsafeGetTensorImpl());
  }
  units.emplace_back();
  for (const auto& p : llama->parameters())
    if (!in_layers.count(p.unsafeGetTensorImpl())) units.back().push_back(p);
  std::map<const c10::TensorImpl*, at::Tensor> expected;
  const auto normal_params = normal->parameters();
  const auto params = llama->parameters();
  for (size_t i = 0; i < params.size(); ++i) expected[params[i].unsafeGetTensorImpl()] = normal_params[i];

  int64_t norm_bytes = 0, largest_unit = 0, peak_held = 0;
  for (const auto& p : llama->named_parameters())
    if (p.key().find("norm") != std::string::npos) norm_bytes += p.value().numel() * 4;
  for (const auto& unit : units) {
    int64_t bytes = 0;
    for (const auto& p : unit) bytes += p.numel() * 4;
    largest_unit = std::max(largest_unit, bytes);
  }
  std::vector<int> calls(units.size(), 0);
  nn::materialize(*llama, units, [&](size_t u) {
    ++calls[u];
    int64_t held = 0;  // the drawn parameters not freed yet
    for (const auto& p : llama->parameters())
      if (!nn::is_deferred(p) && p.numel() > 0) held += p.numel() * 4;
    peak_held = std::max(peak_held, held);
    for (auto& p : units[u]) {
      EXPECT_FALSE(nn::is_deferred(p));
      EXPECT_TRUE(at::equal(p, expected.at(p.unsafeGetTensorImpl())));
      p.set_data(at::empty({0}));  // what sharding does: the whole values freed
    }
  });
  EXPECT_EQ(calls, std::vector<int>(units.size(), 1));
  // At most one unit whole at a time, besides the norms' ones (filled while building, before the layers' draws).
  EXPECT_LE(peak_held, largest_unit + norm_bytes);
  EXPECT_GT(peak_held, 0);
}

TEST(DeferredInitTest, WhatARecordCannotReproduceIsRefused) {
  // A torch::nn layer draws outside nn::initialize: the stream would not match a normal build.
  auto seq = std::make_shared<nn::Sequential>();
  torch::nn::Linear outside(3, 4);
  {
    nn::DeferredInit recording;
    seq->push_back(std::make_shared<nn::Linear>(3, 4));
    outside = torch::nn::Linear(3, 4);
  }
  try {
    nn::materialize(*seq);
    FAIL() << "materialized a record with draws outside it";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("drawn outside nn::initialize"), std::string::npos) << e.what();
  }

  // Writing a deferred parameter fails where it is made (one element behind every index), and changing it by other
  // means is refused when materializing.
  std::shared_ptr<nn::Linear> linear;
  {
    nn::DeferredInit recording;
    linear = std::make_shared<nn::Linear>(3, 4);
  }
  {
    torch::NoGradGuard no_grad;
    EXPECT_THROW(linear->weight.normal_(), c10::Error);
  }
  linear->to(at::kDouble);
  try {
    nn::materialize(*linear);
    FAIL() << "materialized a parameter whose data was replaced";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 'weight' had its data replaced"), std::string::npos) << e.what();
  }

  nn::DeferredInit recording;
  EXPECT_THROW(nn::DeferredInit(), std::logic_error);  // they do not nest
}

// A pretrained directory loaded under a DeferredInit reads nothing until materialized, then holds the file's weights.
TEST(DeferredInitTest, PretrainedWeightsAreReadWhenMaterialized) {
  const auto dir = std::filesystem::temp_directory_path() / ("composer_deferred_hf_" + std::to_string(::getpid()));
  torch::manual_seed(4);
  models::save_llama_hf(*std::make_shared<models::Llama>(llama_config(2)), dir.string(),
                        models::SavePretrainedOptions().dtype(at::kBFloat16));
  const auto normal = models::load_llama_hf(dir.string());
  std::shared_ptr<models::Llama> deferred;
  {
    nn::DeferredInit recording;
    deferred = models::load_llama_hf(dir.string());
    EXPECT_THROW(models::load_llama_hf(dir.string(), at::kDouble), std::invalid_argument);  // convert afterwards
  }
  EXPECT_TRUE(nn::has_deferred_parameters(*deferred));
  nn::materialize(*deferred);
  const auto a = normal->named_parameters(), b = deferred->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i].value(), b[i].value())) << a[i].key();
  std::filesystem::remove_all(dir);
}

// The Trainer with a strategy that does not shard (here one process) draws a deferred model whole before training:
// the same weights as a normal build, trained the same.
TEST(DeferredInitTest, TheTrainerDrawsADeferredModelWholeWithoutFsdp) {
  const auto train = [](bool deferred) {
    torch::manual_seed(2);
    std::shared_ptr<models::Llama> llama;
    if (deferred) {
      nn::DeferredInit recording;
      llama = std::make_shared<models::Llama>(llama_config(2));
    } else {
      llama = std::make_shared<models::Llama>(llama_config(2));
    }
    auto model = std::make_shared<ComposerLanguageModel>(llama);
    auto gen = at::detail::createCPUGenerator(4);
    auto loader = std::make_shared<DatasetLoader>(make_lm_dataset(at::randint(96, {8 * 17 * 2}, gen, at::kLong), 16),
                                                  DatasetLoaderOptions(4).num_workers(0));
    Trainer trainer(
        TrainerOptions(model).train_dataloader(loader).max_duration("2ba").device("cpu").progress_bar(false).seed(1));
    EXPECT_FALSE(nn::has_deferred_parameters(*llama));
    trainer.fit();
    std::vector<at::Tensor> w;
    for (const auto& p : llama->parameters()) w.push_back(p.detach().clone());
    return w;
  };
  const auto normal = train(false), deferred = train(true);
  ASSERT_EQ(normal.size(), deferred.size());
  for (size_t i = 0; i < normal.size(); ++i) EXPECT_TRUE(at::equal(normal[i], deferred[i])) << i;
}

// Surgery at INIT on a model FSDP has not drawn yet (LowPrecisionLayerNorm copies each RMSNorm's weight into its
// replacement) would read weights that do not exist: the Trainer refuses it instead of training from zeros.
TEST(DeferredInitTest, SurgeryOnAModelFsdpHasNotDrawnIsRefused) {
  std::shared_ptr<models::Llama> llama;
  {
    nn::DeferredInit recording;
    llama = std::make_shared<models::Llama>(llama_config(2));
  }
  auto gen = at::detail::createCPUGenerator(4);
  auto loader = std::make_shared<DatasetLoader>(make_lm_dataset(at::randint(96, {8 * 17}, gen, at::kLong), 16),
                                                DatasetLoaderOptions(4).num_workers(0));
  const auto options = TrainerOptions(std::make_shared<ComposerLanguageModel>(llama))
                           .train_dataloader(loader)
                           .max_duration("1ba")
                           .device("cpu")
                           .precision(Precision::AMP_BF16)
                           .progress_bar(false)
                           .algorithms({std::make_shared<algorithms::LowPrecisionLayerNorm>()})
                           .parallelism_config(dist::ParallelismConfig().fsdp(dist::FSDPOptions()));
  try {
    Trainer trainer(options);
    FAIL() << "surgery on deferred weights was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("an algorithm replaced layers of a model whose initialization is deferred"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace composer
