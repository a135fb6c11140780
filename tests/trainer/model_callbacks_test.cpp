// The callbacks that look into the model: ActivationMonitor, ImageVisualizer, Generate and
// ExportForInferenceCallback; checked against Composer, PyTorch and Hugging Face where they compute the same thing
// (tests/trainer/model_callbacks_peer.py).
#include "support/python.h"
#include "support/run_files.h"
#include "support/test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace composer {
namespace {

namespace fs = std::filesystem;

std::string peer() { return testing::source_dir() + "/tests/trainer/model_callbacks_peer.py"; }

/// The MLP 8-16-4 of testing::make_mlp, built from composer::nn layers (observable by ActivationMonitor).
std::shared_ptr<ComposerClassifier> nn_classifier(uint64_t seed = 0) {
  torch::manual_seed(seed);
  auto seq = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(16, 4)});
  return ComposerClassifier::wrap(seq);
}

NamedTensors model_weights(ComposerModel& model) {
  NamedTensors out;
  for (const auto& p : model.named_parameters()) out.emplace_back(p.key(), p.value().detach().clone());
  return out;
}

/// Records what Logger::log_images sends.
class Images : public LoggerDestination {
 public:
  struct Logged {
    std::string name;
    std::vector<int64_t> shape;
    int64_t step;
    at::Tensor images;
  };
  void log_images(const at::Tensor& images, const std::string& name, int64_t step) override {
    logged.push_back({name, images.sizes().vec(), step, images.clone()});
  }
  std::vector<Logged> logged;
};

// ---------------------------------------------------------------------------------------------- ActivationMonitor

TEST(ActivationMonitorTest, SameStatisticsAsComposersHooksOnTheSameModelAndInput) {
  COMPOSER_REQUIRE_PYTHON("torch composer safetensors");
  const fs::path dir = testing::fresh_dir("activation_monitor");
  auto model = nn_classifier();
  const Batch data = testing::make_blobs(24);
  write_safetensors((dir / "weights.safetensors").string(), model_weights(*model));
  write_safetensors((dir / "x.safetensors").string(), {{"x", data.input().narrow(0, 0, 8).contiguous()}});
  std::vector<std::string> names_before;
  for (const auto& p : model->named_parameters()) names_before.push_back(p.key());
  auto mem = std::make_shared<InMemoryLogger>();
  Trainer trainer(
      testing::quiet_options(model)
          .train_dataloader(testing::make_loader(data, 8, /*shuffle=*/false))
          .max_duration("3ba")
          .callbacks({std::make_shared<ActivationMonitor>(ActivationMonitorOptions().interval(Time::from_batch(2)))})
          .loggers({mem}));
  trainer.fit();
  // Logged at batches 0 and 2 (the batch count at BEFORE_FORWARD), once each.
  const auto& max_in = mem->data.at("activations/max/module.0_input.0");
  ASSERT_EQ(max_in.size(), 2u);
  EXPECT_EQ(max_in[0].first.batch, 0);
  EXPECT_EQ(max_in[1].first.batch, 2);
  std::vector<std::string> names_after;
  for (const auto& p : model->named_parameters()) names_after.push_back(p.key());
  EXPECT_EQ(names_after, names_before);  // the observers are gone

  const auto py = testing::run_python({peer(), "activations", (dir / "weights.safetensors").string(),
                                       (dir / "x.safetensors").string(), (dir / "composer.json").string()});
  ASSERT_EQ(py.status, 0) << py.output;
  std::ifstream in(dir / "composer.json");
  const nlohmann::json composer = nlohmann::json::parse(in);
  int compared = 0;
  for (const auto& [key, values] : mem->data) {
    if (key.rfind("activations/", 0) != 0) continue;
    ASSERT_TRUE(composer.contains(key)) << key << " is not one of Composer's keys";
    const double expected = composer[key].is_number() ? composer[key].get<double>() : std::nan("");
    const double got = values.front().second;
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << key;
    } else {
      EXPECT_NEAR(got, expected, 1e-5 * std::max(1.0, std::abs(expected))) << key;
    }
    ++compared;
  }
  // 3 layers; inputs once, outputs one key per sample (8); 4 statistics each.
  EXPECT_EQ(compared, 3 * (1 + 8) * 4);
  for (const auto& key : composer.items()) {
    if (key.key().rfind("activations/max/module.", 0) == 0) {
      EXPECT_TRUE(mem->data.count(key.key())) << key.key();
    }
  }
}

TEST(ActivationMonitorTest, IgnoredLayersAndModelsItCannotObserve) {
  auto mem = std::make_shared<InMemoryLogger>();
  Trainer trainer(testing::quiet_options(nn_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                      .max_duration("1ba")
                      .callbacks({std::make_shared<ActivationMonitor>(
                          ActivationMonitorOptions().interval(Time::from_batch(1)).ignore_module_types({"module.1"}))})
                      .loggers({mem}));
  trainer.fit();
  EXPECT_EQ(mem->data.count("activations/max/module.0_input.0"), 1u);
  EXPECT_EQ(mem->data.count("activations/max/module.1_input.0"), 0u);

  Trainer torch_model(
      testing::quiet_options(testing::make_classifier())
          .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
          .max_duration("1ba")
          .callbacks({std::make_shared<ActivationMonitor>(ActivationMonitorOptions().interval(Time::from_batch(1)))}));
  try {
    torch_model.fit();
    FAIL() << "a torch::nn model cannot be observed";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no composer::nn::Composite layers"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ActivationMonitor(ActivationMonitorOptions().interval(Time::from_string("5sp"))), std::invalid_argument);
}

TEST(ActivationMonitorTest, AGptKeepsWorkingWhileObserved) {
  torch::manual_seed(3);
  auto model = std::make_shared<ComposerLanguageModel>(std::make_shared<models::GPT>(
      models::TransformerConfig().vocab_size(17).max_seq_len(16).n_layer(1).n_head(2).d_model(8)));
  const at::Tensor tokens = at::randint(0, 17, {8, 17}, at::TensorOptions().dtype(at::kLong));
  Batch data({{"input_ids", tokens.narrow(1, 0, 16).contiguous()}, {"labels", tokens.narrow(1, 1, 16).contiguous()}});
  auto mem = std::make_shared<InMemoryLogger>();
  Trainer trainer(
      testing::quiet_options(model)
          .train_dataloader(std::make_shared<TensorDataLoader>(data, TensorDataLoaderOptions(4)))
          .max_duration("2ba")
          .callbacks({std::make_shared<ActivationMonitor>(ActivationMonitorOptions().interval(Time::from_batch(1)))})
          .loggers({mem}));
  trainer.fit();
  EXPECT_EQ(mem->data.at("activations/max/model.h.0.attn_input.0").size(), 2u);
  EXPECT_EQ(mem->data.count("activations/max/model.wte_input.0"), 0u);  // token ids are not activations
  EXPECT_EQ(mem->data.at("activations/l2_norm/model.wte_output.3").size(), 2u);
}

// ------------------------------------------------------------------------------------------------ ImageVisualizer

TEST(ImageVisualizerTest, TrainImagesAtTheIntervalAndTheFirstEvalBatch) {
  auto images = std::make_shared<Images>();
  const at::Tensor x = at::rand({20, 1, 4, 4});
  const Batch data(x, at::randint(0, 3, {20}, at::TensorOptions().dtype(at::kLong)));
  auto module = torch::nn::Sequential(torch::nn::Flatten(), torch::nn::Linear(16, 3));
  Trainer trainer(testing::quiet_options(ComposerClassifier::wrap(module))
                      .train_dataloader(testing::make_loader(data, 10, /*shuffle=*/false))
                      .eval_dataloader(testing::make_loader(data, 4, false))
                      .max_duration("2ep")
                      .eval_interval("2ep")
                      .callbacks({std::make_shared<ImageVisualizer>(
                          ImageVisualizerOptions().interval(Time::from_batch(2)).num_images(3))})
                      .loggers({images}));
  trainer.fit();
  std::vector<std::string> names;
  for (const auto& l : images->logged) names.push_back(l.name + "@" + std::to_string(l.step));
  EXPECT_EQ(names, (std::vector<std::string>{"Images/Train@0", "Images/Train@2", "Images/Eval@4"}));
  EXPECT_EQ(images->logged[0].shape, (std::vector<int64_t>{3, 1, 4, 4}));
  EXPECT_TRUE(at::equal(images->logged[0].images, x.narrow(0, 0, 3)));
}

TEST(ImageVisualizerTest, SegmentationLogsPredictedAndTrueMasks) {
  State state;
  state.batch = Batch(at::rand({2, 3, 4, 5}), at::tensor({0, 2, -1, 1}).repeat({10}).view({2, 4, 5}));
  state.outputs = at::zeros({2, 3, 4, 5});
  state.outputs.select(1, 2).fill_(1.0);  // every pixel predicts class 2
  auto images = std::make_shared<Images>();
  Logger logger(state, {images});
  ImageVisualizer cb(ImageVisualizerOptions().mode("segmentation").interval(Time::from_batch(1)));
  cb.before_forward(state, logger);  // input mode only
  EXPECT_TRUE(images->logged.empty());
  cb.before_loss(state, logger);
  ASSERT_EQ(images->logged.size(), 3u);
  EXPECT_EQ(images->logged[1].name, "Images/Train/prediction");
  EXPECT_EQ(images->logged[1].shape, (std::vector<int64_t>{2, 1, 4, 5}));
  EXPECT_TRUE(at::allclose(images->logged[1].images, at::full({2, 1, 4, 5}, 2.0 / 3)));
  // The ignored label -1 becomes num_classes (3 / 3 = 1.0).
  EXPECT_FLOAT_EQ(images->logged[2].images[0][0][0][2].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(images->logged[2].images[0][0][0][1].item<float>(), 2.0f / 3);
  cb.before_loss(state, logger);  // once per batch
  EXPECT_EQ(images->logged.size(), 3u);
  EXPECT_THROW(ImageVisualizer(ImageVisualizerOptions().mode("masks")), std::invalid_argument);
  EXPECT_THROW(ImageVisualizer(ImageVisualizerOptions().num_images(0)), std::invalid_argument);
}

// ------------------------------------------------------------------------------------------------------- Generate

std::shared_ptr<ComposerLanguageModel> char_gpt(const std::string& text, uint64_t seed = 5) {
  torch::manual_seed(seed);
  auto tokenizer = std::make_shared<CharTokenizer>(text);
  auto model = std::make_shared<ComposerLanguageModel>(std::make_shared<models::GPT>(
      models::TransformerConfig().vocab_size(tokenizer->vocab_size()).max_seq_len(8).n_layer(1).n_head(2).d_model(16)));
  model->set_tokenizer(tokenizer);
  return model;
}

// Greedy decoding by hand: the argmax of the last position, the context cut to the model's 8 positions.
std::string greedy(ComposerLanguageModel& model, const std::string& prompt, int64_t n) {
  const Tokenizer& tok = *model.tokenizer();
  std::vector<int64_t> ids = tok.encode(prompt);
  const size_t start = ids.size();
  torch::NoGradGuard no_grad;
  model.model().eval();
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> context(ids.end() - std::min<size_t>(ids.size(), 8), ids.end());
    const at::Tensor logits = model.model().forward(at::tensor(context).unsqueeze(0));
    ids.push_back(logits[0][-1].argmax().item<int64_t>());
  }
  model.model().train();
  return tok.decode(std::vector<int64_t>(ids.begin() + static_cast<int64_t>(start), ids.end()));
}

TEST(GenerateTest, GreedyGenerationsAtTheIntervalAsATable) {
  const std::string text = "call me ishmael. some years ago, never mind how long precisely";
  auto model = char_gpt(text);
  const auto ids = CharTokenizer(text).encode(text);
  const at::Tensor tokens = at::tensor(ids).narrow(0, 0, 56).view({7, 8}).repeat({2, 1});
  Batch data({{"input_ids", tokens.contiguous()}, {"labels", tokens.roll(-1, 1).contiguous()}});
  auto mem = std::make_shared<InMemoryLogger>();
  auto generate = std::make_shared<Generate>(GenerateOptions()
                                                 .prompts(std::vector<std::string>{"call", "some", "me"})
                                                 .interval(Time::from_batch(2))
                                                 .batch_size(1)
                                                 .generation(models::GenerationOptions().max_new_tokens(12)));
  Trainer trainer(testing::quiet_options(model)
                      .train_dataloader(std::make_shared<TensorDataLoader>(data, TensorDataLoaderOptions(7)))
                      .max_duration("2ba")
                      .callbacks({generate})
                      .loggers({mem}));
  trainer.fit();
  const nlohmann::json& table = mem->tables.at("generations");
  EXPECT_EQ(table["columns"], nlohmann::json({"prompt", "generation"}));
  ASSERT_EQ(table["data"].size(), 3u);
  EXPECT_EQ(table["data"][0][0], "call");
  for (size_t i = 0; i < 3; ++i) {
    const std::string prompt = table["data"][i][0];
    EXPECT_EQ(table["data"][i][1].get<std::string>(), greedy(*model, prompt, 12)) << prompt;
  }
  EXPECT_EQ(generate->generate(trainer.state())[1], greedy(*model, "some", 12));
  // Generating leaves the training as it was: the same run without the callback ends with the same weights.
  auto plain = char_gpt(text);
  Trainer without(testing::quiet_options(plain)
                      .train_dataloader(std::make_shared<TensorDataLoader>(data, TensorDataLoaderOptions(7)))
                      .max_duration("2ba"));
  without.fit();
  const auto a = model->named_parameters();
  const auto b = plain->named_parameters();
  for (const auto& p : a) EXPECT_TRUE(at::equal(p.value(), b[p.key()])) << p.key();
}

TEST(GenerateTest, SamplingUsesItsOwnGeneratorAndStopsAtTheEndOfText) {
  auto model = char_gpt("abcdefgh");
  models::GenerationOptions sample = models::GenerationOptions().do_sample(true).top_k(3).max_new_tokens(6);
  const at::Tensor prompt = at::tensor(std::vector<int64_t>{0, 1, 2}).view({1, 3});
  const auto state_before = at::detail::getDefaultCPUGenerator().get_state();
  const at::Tensor a = models::generate_tokens(model->model(), prompt, sample, at::detail::createCPUGenerator(1));
  const at::Tensor b = models::generate_tokens(model->model(), prompt, sample, at::detail::createCPUGenerator(1));
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_EQ(a.size(1), 9);
  EXPECT_TRUE(at::equal(at::detail::getDefaultCPUGenerator().get_state(), state_before));
  // Greedy with the end-of-text token set to what greedy produces first: one token, then the row is done.
  const at::Tensor first =
      models::generate_tokens(model->model(), prompt, models::GenerationOptions().max_new_tokens(1));
  const int64_t eos = first[0][3].item<int64_t>();
  const at::Tensor stopped =
      models::generate_tokens(model->model(), prompt, models::GenerationOptions().max_new_tokens(5).eos_token_id(eos));
  EXPECT_EQ(stopped.size(1), 4);
  // HF's max_length counts the prompt: 20 - 3 = 17 new tokens by default, at least one when the prompt is longer.
  EXPECT_EQ(models::generate_tokens(model->model(), prompt, models::GenerationOptions()).size(1), 20);
  EXPECT_EQ(models::generate_tokens(model->model(), prompt, models::GenerationOptions().max_length(2)).size(1), 4);
}

TEST(GenerateTest, WarpersAgreeWithHuggingFace) {
  COMPOSER_REQUIRE_PYTHON("torch transformers safetensors");
  const fs::path dir = testing::fresh_dir("generate_warp");
  const at::Tensor logits = at::randn({4, 50}, at::detail::createCPUGenerator(3));
  write_safetensors((dir / "logits.safetensors").string(), {{"logits", logits}});
  struct Case {
    double temperature;
    int64_t top_k;
    double top_p;
  };
  for (const Case c : {Case{1.0, 50, 1.0}, Case{0.7, 5, 1.0}, Case{1.3, 0, 0.9}, Case{0.5, 10, 0.5}}) {
    const auto py =
        testing::run_python({peer(), "warp", (dir / "logits.safetensors").string(), (dir / "out.safetensors").string(),
                             std::to_string(c.temperature), std::to_string(c.top_k), std::to_string(c.top_p)});
    ASSERT_EQ(py.status, 0) << py.output;
    const at::Tensor expected = read_safetensors((dir / "out.safetensors").string()).front().second;
    const at::Tensor got = models::warp_logits(
        logits, models::GenerationOptions().temperature(c.temperature).top_k(c.top_k).top_p(c.top_p));
    EXPECT_TRUE(at::equal(at::isinf(got), at::isinf(expected))) << c.temperature << " " << c.top_k << " " << c.top_p;
    EXPECT_TRUE(at::allclose(got.masked_fill(at::isinf(got), 0), expected.masked_fill(at::isinf(expected), 0), 1e-6));
  }
}

TEST(GenerateTest, BadOptionsAndModelsAreClearErrors) {
  const auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const auto options = [] {
    return GenerateOptions().prompts(std::vector<std::string>{"ab"}).interval(Time::from_batch(1));
  };
  EXPECT_NE(message([] { Generate g(GenerateOptions().interval(Time::from_batch(1))); }).find("prompts is required"),
            std::string::npos);
  EXPECT_NE(message([&] { Generate g(options().prompts(std::vector<std::string>{})); }).find("prompts is empty"),
            std::string::npos);
  EXPECT_NE(message([&] {
              Generate g(options().generation(models::GenerationOptions().temperature(0)));
            }).find("Generate.temperature is 0"),
            std::string::npos);
  EXPECT_NE(message([&] { Generate g(options().generation(models::GenerationOptions().top_p(1.5))); }).find("top_p"),
            std::string::npos);
  EXPECT_NE(message([&] { Generate g(options().batch_size(0)); }).find("batch_size is 0"), std::string::npos);
  auto no_tokenizer = char_gpt("abcdef");
  no_tokenizer->set_tokenizer(nullptr);
  State state;
  state.model = no_tokenizer;
  EXPECT_NE(message([&] { Generate(options()).generate(state); }).find("has no tokenizer"), std::string::npos);
  state.model = testing::make_classifier();
  EXPECT_NE(message([&] { Generate(options()).generate(state); }).find("must be a ComposerLanguageModel"),
            std::string::npos);
  state.model = char_gpt("abcdef");
  EXPECT_NE(message([&] {
              Generate(options().prompts(std::vector<std::string>{"xyz"})).generate(state);
            }).find("Generate.prompts[0]"),
            std::string::npos);
}

// -------------------------------------------------------------------------------------- ExportForInferenceCallback

TEST(ExportForInferenceTest, TorchScriptRunsInPythonWithTheSameOutputsAndNames) {
  COMPOSER_REQUIRE_PYTHON("torch safetensors");
  const fs::path dir = testing::fresh_dir("export_torchscript");
  struct Run {
    std::string name;
    std::shared_ptr<ComposerModel> model;
    Batch data;
    int64_t batch_size;
  };
  const at::Tensor tokens = at::randint(0, 17, {8, 9}, at::TensorOptions().dtype(at::kLong));
  torch::manual_seed(4);
  std::vector<Run> runs;
  runs.push_back({"mlp", nn_classifier(), testing::make_blobs(16), 8});
  runs.push_back(
      {"gpt",
       std::make_shared<ComposerLanguageModel>(std::make_shared<models::GPT>(
           models::TransformerConfig().vocab_size(17).max_seq_len(8).n_layer(2).n_head(2).d_model(8))),
       Batch({{"input_ids", tokens.narrow(1, 0, 8).contiguous()}, {"labels", tokens.narrow(1, 1, 8).contiguous()}}),
       4});
  for (auto& run : runs) {
    const fs::path path = dir / (run.name + ".pt");
    Trainer trainer(testing::quiet_options(run.model)
                        .train_dataloader(testing::make_loader(run.data, run.batch_size, false))
                        .max_duration("2ba")
                        .callbacks({std::make_shared<ExportForInferenceCallback>(
                            ExportForInferenceOptions().save_format("torchscript").save_path(path.string()))}));
    trainer.fit();
    ASSERT_TRUE(fs::exists(path)) << run.name;
    EXPECT_TRUE(run.model->is_training());
    // The traced shape: the first batch (sizes read in C++ are constants in the trace).
    std::vector<std::pair<std::string, at::Tensor>> first;
    const Batch all = inference_inputs(run.data);
    for (const auto& [name, t] : all.fields()) first.emplace_back(name, t.narrow(0, 0, run.batch_size));
    const Batch inputs(first);
    at::Tensor expected;
    {
      torch::NoGradGuard no_grad;
      run.model->eval();
      expected = run.model->forward(inputs);
      run.model->train();
    }
    write_safetensors((dir / "in.safetensors").string(), {{"in0", inputs.fields().front().second}});
    const auto py = testing::run_python(
        {peer(), "jit", path.string(), (dir / "in.safetensors").string(), (dir / "out.safetensors").string()});
    ASSERT_EQ(py.status, 0) << py.output;
    const at::Tensor out = read_safetensors((dir / "out.safetensors").string()).front().second;
    EXPECT_TRUE(at::allclose(out, expected, 1e-5, 1e-6)) << run.name;
    std::vector<std::string> names;
    for (const auto& p : run.model->named_parameters()) names.push_back(p.key());
    for (const auto& b : run.model->named_buffers()) names.push_back(b.key());
    const auto json = nlohmann::json::parse(py.output.substr(py.output.rfind('{')));
    EXPECT_EQ(json["names"].get<std::vector<std::string>>(), names) << run.name;
  }
  // The MLP's graph has no batch size in it: another batch size runs too.
  write_safetensors((dir / "in.safetensors").string(), {{"in0", at::randn({3, 8})}});
  const auto py = testing::run_python({peer(), "jit", (dir / "mlp.pt").string(), (dir / "in.safetensors").string(),
                                       (dir / "out.safetensors").string()});
  ASSERT_EQ(py.status, 0) << py.output;
  EXPECT_EQ(read_safetensors((dir / "out.safetensors").string()).front().second.sizes(), at::IntArrayRef({3, 4}));
}

TEST(ExportForInferenceTest, SafetensorsToAFileUriAndBadInputs) {
  const fs::path dir = testing::fresh_dir("export_safetensors");
  auto model = nn_classifier();
  Trainer trainer(testing::quiet_options(model)
                      .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                      .max_duration("1ba")
                      .callbacks({std::make_shared<ExportForInferenceCallback>(
                          ExportForInferenceOptions()
                              .save_format("safetensors")
                              .save_path("file://" + (dir / "exported" / "model.safetensors").string()))}));
  trainer.fit();
  std::map<std::string, at::Tensor> read;
  for (const auto& [name, t] : read_safetensors((dir / "exported" / "model.safetensors").string())) read[name] = t;
  const NamedTensors expected = model_weights(*model);
  ASSERT_EQ(read.size(), expected.size());
  for (const auto& [name, t] : expected) {
    ASSERT_TRUE(read.count(name)) << name;
    EXPECT_TRUE(at::equal(read.at(name), t)) << name;
  }
  const auto message = [](const ExportForInferenceOptions& o) {
    try {
      ExportForInferenceCallback cb(o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(ExportForInferenceOptions().save_format("onnx").save_path("m.onnx")).find("torch.onnx.export"),
            std::string::npos);
  EXPECT_NE(message(ExportForInferenceOptions().save_format("pickle").save_path("m")).find("torchscript, safetensors"),
            std::string::npos);
  EXPECT_NE(message(ExportForInferenceOptions().save_format("torchscript")).find("save_path is required"),
            std::string::npos);
  // A destination that cannot be written to is refused when the callback is made, before any training.
  EXPECT_NE(message(ExportForInferenceOptions().save_format("torchscript").save_path("gs://b/m.pt"))
                .find("ExportForInferenceCallback.save_path 'gs://b/m.pt': unknown object store 'gs://'"),
            std::string::npos);
  EXPECT_NE(message(ExportForInferenceOptions().save_format("torchscript").save_path("s3:/b/m.pt"))
                .find("save_path 's3:/b/m.pt' looks like a mistyped object-store URI"),
            std::string::npos);
  EXPECT_NE(message(ExportForInferenceOptions().save_format("torchscript").save_path("s3://bucket"))
                .find("names no object after the bucket"),
            std::string::npos);
  EXPECT_THROW(inference_inputs(testing::make_blobs(4), {"pixels"}), std::invalid_argument);
  // A path that cannot be written (its folder is a file) is an error naming it, and leaves nothing behind.
  std::ofstream(dir / "a_file") << "x";
  const std::string bad = (dir / "a_file" / "m.pt").string();
  try {
    export_for_inference(*model, inference_inputs(testing::make_blobs(4)), bad, ExportFormat::TORCHSCRIPT);
    FAIL() << "wrote under a file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  EXPECT_EQ(testing::read_text((dir / "a_file").string()), "x");
}

}  // namespace
}  // namespace composer
