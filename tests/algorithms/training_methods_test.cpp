// The methods that act on the model over a run: EMA (averaging, evaluation and checkpoints with the
// average, resume), LayerFreezing (the schedule through the Trainer), NoOpModel (the stand-in model, re-created on
// load), LowPrecisionLayerNorm (norms in the autocast dtype) and Alibi (linear attention biases, short sequences).
#include "algorithms/algo_support.h"
#include "composer/core/serialization.h"
#include "composer/models/llama.h"
#include "composer/utils/compat.h"
#include "support/errors.h"
#include "support/test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>

using namespace composer;

namespace {

std::vector<at::Tensor> snapshot(const torch::nn::Module& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

void expect_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << what << " [" << i << "]";
}

void expect_close(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-6, 1e-7)) << what << " [" << i << "]";
}

// The model's weights at every BATCH_END (after the step) and at every EVAL_START (after the algorithms ran).
class WeightRecorder : public Callback {
 public:
  void batch_end(State& state, Logger&) override { trained.push_back(snapshot(*state.model)); }
  void eval_start(State& state, Logger&) override { evaluated.push_back(snapshot(*state.model)); }
  void eval_end(State& state, Logger&) override { after_eval.push_back(snapshot(*state.model)); }
  std::vector<std::vector<at::Tensor>> trained, evaluated, after_eval;
};

using composer::testing::error_of;

TrainerOptions blob_run(std::shared_ptr<ComposerModel> model) {
  const Batch data = composer::testing::make_blobs(64);
  return composer::testing::quiet_options(std::move(model)).train_dataloader(composer::testing::make_loader(data, 16));
}

}  // namespace

// The average follows Composer's recurrence from the weights after the first step; evaluation sees it, and the
// training weights are back after evaluation and after fit.
TEST(EMATest, EvaluationUsesTheAverageOfTheTrainedWeights) {
  auto model = composer::testing::make_classifier();
  auto recorder = std::make_shared<WeightRecorder>();
  auto ema = std::make_shared<algorithms::EMA>(algorithms::EMAOptions().half_life(Time::from_batch(2)));
  Trainer trainer(
      blob_run(model)
          .eval_dataloader(composer::testing::make_loader(composer::testing::make_blobs(32, 8, 4, 3), 16, false))
          .eval_interval(Time::from_batch(3))
          .max_duration(Time::from_batch(6))
          .algorithms({ema})
          .callbacks({recorder}));
  trainer.fit();
  ASSERT_EQ(recorder->trained.size(), 6u);
  ASSERT_EQ(recorder->evaluated.size(), 2u);
  const double s = std::pow(2.0, -0.5);
  EXPECT_DOUBLE_EQ(ema->smoothing(), s);
  std::vector<at::Tensor> average = recorder->trained[0];  // started at the first BATCH_END (ema_start 0dur)
  for (size_t b = 0; b < 6; ++b) {
    for (size_t i = 0; i < average.size(); ++i) average[i] = average[i] * s + recorder->trained[b][i] * (1 - s);
    if (b == 2) expect_close(recorder->evaluated[0], average, "evaluated weights at batch 3");
    if (b == 5) expect_close(recorder->evaluated[1], average, "evaluated weights at batch 6");
  }
  expect_equal(recorder->after_eval[1], recorder->trained[5], "weights after evaluation");
  expect_equal(snapshot(*model), recorder->trained[5], "weights after fit");
  EXPECT_FALSE(ema->ema_weights_active());
  // The averaged weights can be copied out.
  auto copy = composer::testing::make_classifier(8, 16, 4, 5);
  ema->get_ema_model(*copy);
  expect_close(snapshot(*copy), average, "get_ema_model");
}

// A checkpoint holds the averaged weights as the model and the training weights in EMA's state; a run resumed from
// it continues exactly as the uninterrupted one.
TEST(EMATest, CheckpointsHoldTheAverageAndResumeContinuesExactly) {
  const auto dir = std::filesystem::temp_directory_path() / "ema_checkpoints";
  std::filesystem::remove_all(dir);
  auto run = [&](std::shared_ptr<ComposerModel> model, const std::string& folder, const std::string& load) {
    auto opts = blob_run(std::move(model))
                    .max_duration(Time::from_batch(5))
                    .algorithms({algorithms::make_algorithm("ema", {{"half_life", "3ba"}})})
                    .save_folder(folder)
                    .save_interval(Time::from_batch(2));
    if (!load.empty()) opts.load_path(load);
    return opts;
  };
  auto full_model = composer::testing::make_classifier();
  auto recorder = std::make_shared<WeightRecorder>();
  {
    Trainer full(run(full_model, (dir / "full").string(), "").callbacks({recorder}));
    full.fit();
  }
  const std::string ckpt = (dir / "full" / "ep0-ba2-rank0.pt").string();
  ASSERT_TRUE(std::filesystem::exists(ckpt));
  const auto state = read_checkpoint(ckpt).toGenericDict().at("state").toGenericDict();
  const auto algos = state.at("algorithms").toList();
  ASSERT_EQ(algos.size(), 1u);
  const auto ema_state = algos.get(0).toTuple()->elements().at(1).toGenericDict();
  EXPECT_TRUE(ema_state.at("ema_weights_active").toBool());
  EXPECT_TRUE(ema_state.at("ema_started").toBool());
  // The algorithm's copy is the training weights of batch 2; the model's are not.
  const auto held = ema_state.at("ema_model").toGenericDict().at("named_parameters_dict").toGenericDict();
  const auto model_weights = state.at("model").toGenericDict();
  const auto trained = recorder->trained[1];
  size_t i = 0, differ = 0;
  for (const auto& item : full_model->named_parameters()) {
    const at::Tensor h = held.at(item.key()).toTensor();
    EXPECT_TRUE(torch::equal(h, trained[i])) << item.key();
    differ += !torch::equal(model_weights.at(item.key()).toTensor(), trained[i]);
    ++i;
  }
  EXPECT_EQ(differ, i) << "the checkpoint's model should hold the averaged weights";

  auto resumed_model = composer::testing::make_classifier(8, 16, 4, 9);
  {
    Trainer resumed(run(resumed_model, (dir / "resumed").string(), ckpt));
    EXPECT_EQ(resumed.state().timestamp.batch, 2);
    resumed.fit();
  }
  // Both runs end with the checkpoint at the end of training, which swapped the average in.
  expect_equal(snapshot(*resumed_model), snapshot(*full_model), "resumed run vs uninterrupted run");
  std::filesystem::remove_all(dir);
}

TEST(EMATest, BadArgumentsAndCheckpointStatesAreNamed) {
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("ema", {{"smoothing", "0.9"}});
            }),
            "EMA: only one of half_life or smoothing may be set (set half_life to None)");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("ema", {{"half_life", "None"}});
            }),
            "EMA: either half_life or smoothing must be set");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("ema", {{"half_life", "0.5dur"}});
            }),
            "EMA.half_life must be a positive number of batches or epochs ('1000ba'), got '0.5dur'");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("ema", {{"update_interval", "1ep"}});
            }),
            "EMA: the units of half_life ('1000ba') and update_interval ('1ep') must match");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("ema", {{"ema_start", "10tok"}});
            }),
            "EMA.ema_start must be in 'dur', 'ba' or 'ep', got '10tok'");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("ema", {{"half_life", "None"}, {"smoothing", "1.5"}});
            }),
            "EMA.smoothing must be in [0.0, 1.0], got 1.5");
  // Smoothing alone (Composer fails with an AttributeError without update_interval) updates every batch.
  auto by_smoothing = std::dynamic_pointer_cast<algorithms::EMA>(
      algorithms::make_algorithm("ema", {{"half_life", "None"}, {"smoothing", "0.9"}}));
  EXPECT_EQ(by_smoothing->options().interval().to_string(), "1ba");
  EXPECT_DOUBLE_EQ(by_smoothing->smoothing(), 0.9);

  algorithms::EMA ema;
  Dict bad = new_dict();
  bad.insert("repr", ema.repr());
  bad.insert("ema_model", std::string("weights"));
  EXPECT_EQ(error_of([&] { ema.load_state_dict(bad); }), "EMA checkpoint state: ema_model must be a dict");
  Dict wrong = new_dict();
  Dict inner = new_dict();
  Dict params = new_dict();
  params.insert("w", 3);
  inner.insert("named_parameters_dict", params);
  inner.insert("named_buffers_dict", new_dict());
  wrong.insert("ema_model", inner);
  EXPECT_EQ(error_of([&] { ema.load_state_dict(wrong); }),
            "EMA checkpoint state: ema_model.named_parameters_dict must map names to tensors");
  EXPECT_FALSE(ema.ema_model().has_value());  // nothing half-loaded
  // Averaged weights of another model are refused by name, not by a LibTorch assertion.
  auto model = composer::testing::make_classifier();
  auto other = algorithms::EMAParameters::of(*composer::testing::make_classifier(8, 32, 4));
  EXPECT_NE(error_of([&] { other.swap_params(*model); }).find("EMA: the averaged '"), std::string::npos);
}

namespace {

// Five linear layers (four can freeze) as a classifier.
std::shared_ptr<ComposerClassifier> deep_classifier() {
  torch::manual_seed(0);
  auto net = std::make_shared<nn::Sequential>();
  net->push_back(std::make_shared<nn::Linear>(8, 16));
  for (int i = 0; i < 3; ++i) {
    net->push_back(std::make_shared<nn::ReLU>());
    net->push_back(std::make_shared<nn::Linear>(16, 16));
  }
  net->push_back(std::make_shared<nn::Linear>(16, 4));
  return ComposerClassifier::wrap(net);
}

class FirstLayerRecorder : public Callback {
 public:
  void epoch_end(State& state, Logger&) override {
    first.push_back(state.model->parameters().front().detach().clone());
    in_optimizer.push_back(state.optimizer->param_groups().front().params().size());
  }
  std::vector<at::Tensor> first;
  std::vector<size_t> in_optimizer;
};

}  // namespace

TEST(LayerFreezingTest, FreezesMoreLayersEachEpochAndFrozenOnesStayPut) {
  auto model = deep_classifier();
  auto logs = std::make_shared<InMemoryLogger>();
  auto recorder = std::make_shared<FirstLayerRecorder>();
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(),
                                                       torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
  Trainer trainer(blob_run(model)
                      .optimizer(optimizer)
                      .max_duration(Time::from_epoch(4))
                      .algorithms({algorithms::make_algorithm("layer_freezing", {{"freeze_start", "0.0"}})})
                      .loggers({logs})
                      .callbacks({recorder}));
  trainer.fit();
  EXPECT_EQ(logs->values("layer_freezing/layers_frozen"), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(logs->values("layer_freezing/percentage_frozen"), (std::vector<double>{0.25, 0.5, 0.75, 1.0}));
  EXPECT_EQ(recorder->in_optimizer, (std::vector<size_t>{8, 6, 4, 2}));  // weight and bias per frozen layer
  for (size_t e = 1; e < recorder->first.size(); ++e) EXPECT_TRUE(torch::equal(recorder->first[e], recorder->first[0]));
  const auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].requires_grad(), i >= 8) << i;
    if (i < 8) {
      EXPECT_FALSE(params[i].grad().defined()) << i;
    }
  }
  EXPECT_TRUE(algorithms::make_algorithm("layer_freezing")->find_unused_parameters());
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("layer_freezing", {{"freeze_start", "1.0"}});
            }),
            "LayerFreezing.freeze_start must be in [0.0, 1.0), got 1.0");
  EXPECT_EQ(error_of([&] { functional::freeze_layers(*model, nullptr, 1.5); }),
            "freeze_layers.current_duration must be in [0.0, 1.0], got 1.5");
  // Under FSDP the optimizer steps flat shards laid out at the start, which later freezing cannot take out: refused
  // when the Trainer is built, before any training.
  const std::string fsdp = error_of([] {
    Trainer refused(blob_run(deep_classifier())
                        .parallelism_config(dist::ParallelismConfig().fsdp(dist::FSDPOptions()))
                        .algorithms({algorithms::make_algorithm("layer_freezing")}));
  });
  EXPECT_NE(fsdp.find("LayerFreezing: not supported under FSDP (parallelism_config.fsdp)"), std::string::npos) << fsdp;
}

TEST(NoOpModelTest, TrainsTheStandInAndACheckpointRecreatesIt) {
  const auto dir = std::filesystem::temp_directory_path() / "no_op_model";
  std::filesystem::remove_all(dir);
  auto model = composer::testing::make_classifier();
  // Binary targets, so the stand-in's BinaryAccuracy is defined.
  const Batch data(at::randn({32, 8}), at::randint(0, 2, {32}, at::TensorOptions().dtype(at::kLong)));
  Trainer trainer(composer::testing::quiet_options(model)
                      .train_dataloader(composer::testing::make_loader(data, 8))
                      .eval_dataloader(composer::testing::make_loader(data, 8, false))
                      .max_duration(Time::from_batch(4))
                      .algorithms({algorithms::make_algorithm("no_op_model")})
                      .save_folder(dir.string())
                      .save_interval(Time::from_batch(4)));
  trainer.fit();
  auto* stand_in = dynamic_cast<algorithms::NoOpModelClass*>(trainer.state().model.get());
  ASSERT_NE(stand_in, nullptr);
  ASSERT_EQ(stand_in->parameters().size(), 1u);
  EXPECT_NE(stand_in->weights.item<double>(), 1.5);  // trained
  EXPECT_TRUE(std::isfinite(trainer.state().total_loss_dict.at("loss/train/total")));
  EXPECT_DOUBLE_EQ(trainer.state().eval_metric_values.at("BinaryAccuracy"), 1.0);

  Trainer loaded(composer::testing::quiet_options(composer::testing::make_classifier(8, 16, 4, 3))
                     .train_dataloader(composer::testing::make_loader(data, 8))
                     .load_path((dir / "ep0-ba4-rank0.pt").string()));
  auto* recreated = dynamic_cast<algorithms::NoOpModelClass*>(loaded.state().model.get());
  ASSERT_NE(recreated, nullptr);
  EXPECT_TRUE(torch::equal(recreated->weights, stand_in->weights));
  std::filesystem::remove_all(dir);

  EXPECT_EQ(error_of([&] {
              stand_in->forward(Batch({{"input_ids", at::zeros({2, 3})}}));
            }),
            "NoOpModel: the batch must be a pair (input, target), as Composer's NoOpModelClass unpacks it; got 1 "
            "fields");
}

TEST(LowPrecisionLayerNormTest, NormsRunInTheAutocastDtypeAtBf16Only) {
  auto model = composer::testing::tiny_gpt();
  const auto before = snapshot(*model);
  const int64_t norms = count_module_instances<nn::LayerNorm>(*model);
  ASSERT_EQ(norms, 5);  // ln_1 and ln_2 in each of two blocks, ln_f
  Trainer trainer(composer::testing::quiet_options(model)
                      .train_dataloader(composer::testing::tiny_token_loader())
                      .precision(Precision::AMP_BF16)
                      .max_duration(Time::from_batch(2))
                      .algorithms({algorithms::make_algorithm("low_precision_layernorm")}));
  EXPECT_EQ(count_module_instances<nn::LPLayerNorm>(*model), norms);
  expect_equal(snapshot(*model), before, "weights kept by the surgery");
  trainer.fit();
  EXPECT_TRUE(std::isfinite(trainer.state().total_loss_dict.at("loss/train/total")));

  // Under bf16 autocast the norm returns bfloat16, the value of layer_norm on the bfloat16-cast input and weights.
  nn::LPLayerNorm low(6);
  nn::LayerNorm plain(6);
  const at::Tensor x = at::randn({3, 6});
  {
    compat::AutocastGuard autocast(c10::DeviceType::CPU, at::kBFloat16);
    const at::Tensor y = low.forward(x);
    EXPECT_EQ(y.scalar_type(), at::kBFloat16);
    EXPECT_EQ(plain.forward(x).scalar_type(), at::kFloat);  // autocast runs layer_norm in float32
    const at::Tensor expected = [&] {
      compat::set_autocast_enabled(c10::DeviceType::CPU, false);
      at::Tensor e = at::layer_norm(x.to(at::kBFloat16), {6}, low.weight.to(at::kBFloat16), low.bias.to(at::kBFloat16));
      compat::set_autocast_enabled(c10::DeviceType::CPU, true);
      return e;
    }();
    EXPECT_TRUE(torch::equal(y, expected));
    EXPECT_TRUE(compat::autocast_enabled(c10::DeviceType::CPU));  // restored after the norm
  }
  EXPECT_EQ(low.forward(x).scalar_type(), at::kFloat);  // without autocast it is a LayerNorm

  // At fp32 nothing changes (Composer's NoEffectWarning).
  auto fp32_model = composer::testing::tiny_gpt();
  Trainer fp32(composer::testing::quiet_options(fp32_model)
                   .train_dataloader(composer::testing::tiny_token_loader())
                   .algorithms({algorithms::make_algorithm("low_precision_layernorm")}));
  EXPECT_EQ(count_module_instances<nn::LPLayerNorm>(*fp32_model), 0);
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("low_precision_layernorm", {{"apply_at", "fit_start"}});
            }),
            "LowPrecisionLayerNorm.apply_at must be 'init', 'before_load' or 'after_load', got 'fit_start'");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("low_precision_layernorm", {{"apply_at", "sometime"}});
            }),
            "low_precision_layernorm.apply_at: expected an event such as 'init' or 'after_load', got 'sometime'");
}

// On a Llama-family model the same algorithm replaces the RMSNorms (llm-foundry's LPRMSNorm; Composer's own
// LowPrecisionLayerNorm knows only LayerNorm): weights kept, the norm computed in bf16 under autocast and returned in
// the input's dtype, and a plain RMSNorm without autocast.
TEST(LowPrecisionLayerNormTest, RMSNormsOfALlamaRunInTheAutocastDtype) {
  at::manual_seed(0);
  auto llama = std::make_shared<models::Llama>(models::LlamaConfig()
                                                   .vocab_size(50)
                                                   .hidden_size(16)
                                                   .intermediate_size(24)
                                                   .num_hidden_layers(2)
                                                   .num_attention_heads(2));
  for (auto& p : llama->parameters()) {
    at::NoGradGuard no_grad;
    p.add_(at::randn_like(p), 0.1);  // norms whose weights are not all ones
  }
  const auto before = snapshot(*llama);
  const at::Tensor ids = at::randint(50, {2, 7}, at::kLong);
  const at::Tensor logits = llama->forward(ids);
  EXPECT_EQ(functional::apply_low_precision_layernorm(*llama, Precision::FP32).size(), 0u);
  EXPECT_EQ(functional::apply_low_precision_layernorm(*llama, Precision::AMP_BF16).size(), 5u);  // 2 per layer + norm
  EXPECT_EQ(count_module_instances<nn::LPRMSNorm>(*llama), 5);
  expect_equal(snapshot(*llama), before, "weights kept by the surgery");
  EXPECT_TRUE(torch::equal(llama->forward(ids), logits));  // without autocast nothing changes

  auto low = std::dynamic_pointer_cast<nn::LPRMSNorm>(llama->named_modules()["model.norm"]);
  ASSERT_NE(low, nullptr);
  const at::Tensor x = at::randn({3, 16});
  compat::AutocastGuard autocast(c10::DeviceType::CPU, at::kBFloat16);
  const at::Tensor y = low->forward(x);
  EXPECT_EQ(y.scalar_type(), at::kFloat);
  compat::set_autocast_enabled(c10::DeviceType::CPU, false);
  const at::Tensor xb = x.to(at::kBFloat16);
  const at::Tensor expected = (xb * at::rsqrt(xb.pow(2).mean(-1, true) + low->eps) * low->weight.to(at::kBFloat16));
  compat::set_autocast_enabled(c10::DeviceType::CPU, true);
  EXPECT_TRUE(torch::equal(y, expected.to(at::kFloat)));
  EXPECT_FALSE(torch::equal(y, low->nn::RMSNorm::forward(x)));  // the float32 norm differs in the low bits
  EXPECT_TRUE(compat::autocast_enabled(c10::DeviceType::CPU));
}

namespace {

// The input_ids shape each BEFORE_FORWARD sees.
class ShapeRecorder : public Callback {
 public:
  void before_forward(State& state, Logger&) override {
    shapes.push_back(state.batch.at(std::string("input_ids")).sizes().vec());
  }
  std::vector<std::vector<int64_t>> shapes;
};

}  // namespace

// Training runs on batches of 4x the rows and a quarter of the length, the timestamp counts the same tokens, the
// position embedding is zero and frozen, and the model then takes sequences twice as long as it was built for.
TEST(AlibiTest, TrainsOnShortSequencesAndEvaluatesLongerOnes) {
  auto model = composer::testing::tiny_gpt();  // max_seq_len 32
  auto shapes = std::make_shared<ShapeRecorder>();
  Trainer trainer(composer::testing::quiet_options(model)
                      .train_dataloader(composer::testing::tiny_token_loader())
                      .max_duration(Time::from_batch(2))
                      .algorithms({algorithms::make_algorithm("alibi", {{"max_sequence_length", "64"}})})
                      .callbacks({shapes}));
  EXPECT_EQ(count_module_instances<nn::AlibiSelfAttention>(*model), 2);
  EXPECT_EQ(count_module_instances<models::SelfAttention>(*model), 0);
  trainer.fit();
  EXPECT_EQ(shapes->shapes, (std::vector<std::vector<int64_t>>{{32, 8}, {32, 8}}));
  // Counted as the loader gave them (2 batches of 8 sequences of 32), before AFTER_DATALOADER folds each batch into
  // 32 sequences of 8, as Composer counts them.
  EXPECT_EQ(trainer.state().timestamp.token, 2 * 8 * 32);
  EXPECT_EQ(trainer.state().timestamp.sample, 2 * 8);
  const auto* wpe = model->named_parameters().find("model.wpe.weight");
  ASSERT_NE(wpe, nullptr);
  EXPECT_EQ(wpe->size(0), 64);
  EXPECT_FALSE(wpe->requires_grad());
  EXPECT_TRUE(torch::equal(*wpe, at::zeros_like(*wpe)));  // not trained
  model->eval();
  const at::Tensor long_ids = at::randint(0, 17, {2, 64}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor logits = model->forward(Batch({{"input_ids", long_ids}, {"labels", long_ids}}));
  EXPECT_EQ(logits.sizes().vec(), (std::vector<int64_t>{2, 64, 17}));
  EXPECT_TRUE(logits.isfinite().all().item<bool>());
  // Causal: the first 32 positions' outputs do not depend on the tokens after them.
  const at::Tensor prefix = model->forward(Batch(
      {{"input_ids", long_ids.narrow(1, 0, 32).contiguous()}, {"labels", long_ids.narrow(1, 0, 32).contiguous()}}));
  EXPECT_TRUE(torch::allclose(prefix, logits.narrow(1, 0, 32), 1e-5, 1e-5));

  const at::Tensor too_long = at::zeros({1, 65}, at::TensorOptions().dtype(at::kLong));
  EXPECT_EQ(error_of([&] {
              model->forward(Batch({{"input_ids", too_long}, {"labels", too_long}}));
            }),
            "sequence length 65 exceeds max_seq_len 64");
  auto plain = composer::testing::tiny_gpt();
  EXPECT_EQ(error_of([&] {
              plain->forward(Batch({{"input_ids", long_ids}, {"labels", long_ids}}));
            }),
            "sequence length 64 exceeds max_seq_len 32");
}

// The attention against softmax(q k^T / sqrt(d) + slope * -(i - j) [future masked]) v written out, causal and not.
TEST(AlibiTest, AttentionAddsTheLinearBiases) {
  torch::manual_seed(4);
  for (bool causal : {true, false}) {
    models::SelfAttention plain(8, 2, causal, 0.0);
    nn::AlibiSelfAttention alibi(plain, 16);
    const at::Tensor x = at::randn({2, 5, 8});
    const auto& c_attn = static_cast<const nn::Linear&>(alibi.child("c_attn"));
    const auto qkv = at::linear(x, c_attn.weight, c_attn.bias).split(8, 2);
    auto heads = [](const at::Tensor& t) { return t.view({2, 5, 2, 4}).transpose(1, 2); };
    const auto slopes = functional::alibi_head_slopes(2);
    const at::Tensor i = at::arange(5).view({5, 1}), j = at::arange(5).view({1, 5});
    std::vector<at::Tensor> bias_per_head;
    for (double slope : slopes) {
      at::Tensor b = causal ? (j.to(at::kFloat) * static_cast<float>(slope)).expand({5, 5})
                            : -(j - i).abs().to(at::kFloat) * static_cast<float>(slope);
      if (causal) b = b.masked_fill(j > i, -std::numeric_limits<float>::infinity());
      bias_per_head.push_back(b);
    }
    const at::Tensor scores =
        heads(qkv[0]).matmul(heads(qkv[1]).transpose(-1, -2)) / 2.0 + at::stack(bias_per_head).unsqueeze(0);
    at::Tensor expected = scores.softmax(-1).matmul(heads(qkv[2])).transpose(1, 2).contiguous().view({2, 5, 8});
    const auto& c_proj = static_cast<const nn::Linear&>(alibi.child("c_proj"));
    expected = at::linear(expected, c_proj.weight, c_proj.bias);
    EXPECT_TRUE(torch::allclose(alibi.forward(x), expected, 1e-5, 1e-6)) << "causal " << causal;
  }
}

// A rotary model gets a clear refusal, not a silent second position scheme.
TEST(AlibiTest, RefusesALlamaModel) {
  auto llama = std::make_shared<models::Llama>(models::LlamaConfig()
                                                   .vocab_size(16)
                                                   .hidden_size(16)
                                                   .intermediate_size(16)
                                                   .num_hidden_layers(1)
                                                   .num_attention_heads(2));
  EXPECT_EQ(error_of([&] { functional::apply_alibi(*llama, 32); }),
            "Alibi does not apply to models::Llama: its attention uses rotary position embeddings (Alibi replaces the "
            "learned position embeddings of GPT and BERT); remove Alibi from the algorithms");
}

TEST(AlibiTest, BadArgumentsAndBatchesAreNamed) {
  EXPECT_EQ(error_of([] { algorithms::make_algorithm("alibi"); }),
            "alibi.max_sequence_length: required (the longest sequence the model will see (training or evaluation))");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("alibi", {{"max_sequence_length", "0"}});
            }),
            "Alibi.max_sequence_length must be > 0, got 0.0");
  EXPECT_EQ(
      error_of([] {
        algorithms::make_algorithm("alibi", {{"max_sequence_length", "64"}, {"train_sequence_length_scaling", "0"}});
      }),
      "Alibi.train_sequence_length_scaling must be in (0.0, 1.0], got 0.0");
  auto alibi =
      algorithms::make_algorithm("alibi", {{"max_sequence_length", "64"}, {"train_sequence_length_scaling", "0.3"}});
  State state;
  Logger logger(state);
  state.batch = Batch({{"input_ids", at::zeros({8, 32}, at::kLong)}, {"labels", at::zeros({8, 32}, at::kLong)}});
  EXPECT_EQ(error_of([&] { alibi->apply(Event::AFTER_DATALOADER, state, logger); }),
            "Alibi: cannot reshape batch field 'input_ids' of shape [8, 32] to [26, 9]: sequence length x "
            "train_sequence_length_scaling must be a whole number");
  state.batch = Batch({{"input_ids", at::zeros({8, 32}, at::kLong)}, {"mask", at::zeros({8}, at::kLong)}});
  auto quarter = algorithms::make_algorithm("alibi", {{"max_sequence_length", "64"}});
  EXPECT_EQ(error_of([&] { quarter->apply(Event::AFTER_DATALOADER, state, logger); }),
            "Alibi: batch field 'mask' must be [batch, sequence] to be reshaped, got [8]");
  // An image batch is left alone (Composer reshapes dict batches only).
  state.batch = Batch(at::zeros({4, 3, 8, 8}), at::zeros({4}, at::kLong));
  alibi->apply(Event::AFTER_DATALOADER, state, logger);
  EXPECT_EQ(state.batch.input().sizes().vec(), (std::vector<int64_t>{4, 3, 8, 8}));
}
