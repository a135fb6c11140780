// The library's registries: one per kind, built from the options' field lists. Names, errors, reprs and the docs
// page all come from the same lists.
#include "composer/algorithms/registry.h"
#include "composer/callbacks/registry.h"
#include "composer/callbacks/speed_monitor.h"
#include "composer/callbacks/threshold_stopper.h"
#include "composer/checkpoint/checkpoint_saver.h"
#include "composer/core/state.h"
#include "composer/datasets/registry.h"
#include "composer/loggers/registry.h"
#include "composer/loss/registry.h"
#include "composer/models/llama.h"
#include "composer/models/registry.h"
#include "composer/optim/decoupled_adamw.h"
#include "composer/optim/registry.h"
#include "support/data_paths.h"
#include "support/errors.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace composer {
namespace {

using testing::error_of;

TEST(RegistryTest, ParseReprKeepsListsAndQuotedCommasWhole) {
  const auto [name, args] = parse_repr("MultiStepScheduler(milestones=['10ep', '20ep'], gamma=0.1, note='a, b')");
  EXPECT_EQ(name, "MultiStepScheduler");
  ASSERT_EQ(args.size(), 3u);
  EXPECT_EQ(args.at("milestones"), "['10ep', '20ep']");
  EXPECT_EQ(args.at("gamma"), "0.1");
  EXPECT_EQ(args.at("note"), "a, b");
  EXPECT_NE(error_of([] { parse_repr("NoParens"); }).find("is not of the form Name(key=value, ...)"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_repr("X(1)"); }).find("argument '1' has no '='"), std::string::npos);
}

TEST(RegistryTest, ListsAndReprsShareOneBracketAndQuoteAwareSplitter) {
  EXPECT_EQ(split_top_level("a=1, b=[1, 2], c='x, y', d=(3, 4)"),
            (std::vector<std::string>{"a=1", " b=[1, 2]", " c='x, y'", " d=(3, 4)"}));
  EXPECT_EQ(split_list("['a, b', c, \"d\"]"), (std::vector<std::string>{"a, b", "c", "d"}));
  EXPECT_EQ(split_list("[[1, 2], [3]]"), (std::vector<std::string>{"[1, 2]", "[3]"}));
  EXPECT_TRUE(split_list("[]").empty());
  EXPECT_EQ(unquote("  'x'  "), "x");
  EXPECT_EQ(unquote("'x\""), "'x\"");  // quotes that do not match stay
}

struct SubFields {
  TORCH_ARG(int64_t, folder) = 1;
  TORCH_ARG(int64_t, keep) = 2;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("folder", self.folder_, "sub folder");
    visit("keep", self.keep_, "kept");
  }
};

struct OuterFields {
  TORCH_ARG(int64_t, own) = 0;
  TORCH_ARG(SubFields, sub);

 public:
  static constexpr std::array<std::pair<const char*, const char*>, 1> kSubKeys{{{"folder", "save_folder"}}};
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("own", self.own_, "own");
    SubFields::for_each_field(self.sub_, renamed(visit, kSubKeys));
  }
};

TEST(RegistryTest, RenamedNestsOneFieldListInAnother) {
  std::vector<std::string> keys;
  for (const auto& f : describe_fields<OuterFields>()) keys.push_back(f.name);
  EXPECT_EQ(keys, (std::vector<std::string>{"own", "save_folder", "keep"}));
  Hparams h({{"save_folder", "7"}, {"keep", "3"}}, "outer");
  const auto read = read_options<OuterFields>(h);
  EXPECT_EQ(read.sub().folder(), 7);
  EXPECT_EQ(read.sub().keep(), 3);
  Hparams bad({{"folder", "7"}}, "outer");  // the inner name is not a key of the outer list
  EXPECT_NE(error_of([&] { read_options<OuterFields>(bad); }).find("outer.folder: unknown"), std::string::npos);
}

// An entry whose defaults follow the context and whose build returns the product by value.
struct Shape {
  int64_t width = 0;
};
struct FollowingFields {
  TORCH_ARG(int64_t, width) = 4;

 public:
  void follow(const int64_t& context_width) { width_ = context_width; }
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("width", self.width_, "width (default: the context's)");
  }
};

TEST(RegistryTest, EntriesFollowTheirContextAndMayReturnAValue) {
  const Registry<Shape, const int64_t&> shapes(
      "shape", {registry_entry<Shape, const int64_t&>(
                   "shape", "Shape", "a width", FollowingFields(),
                   [](Hparams&, const FollowingFields& f, const int64_t&) { return Shape{f.width()}; })});
  EXPECT_EQ(shapes.entries().at(0).fields.at(0).value, "4");  // the docs show the static default
  EXPECT_EQ(shapes.make("shape", {}, "", 9)->width, 9);
  EXPECT_EQ(shapes.make("shape", {{"width", "2"}}, "", 9)->width, 2);
}

TEST(RegistryTest, RequiredValuesSetInCodeAreNamed) {
  Required<double> unset;
  EXPECT_EQ(error_of([&] { required_value(unset, "Thing", "alpha", "a number"); }),
            "Thing: alpha is required (a number)");
  EXPECT_EQ(required_value(Required<double>(2.0), "Thing", "alpha", "a number"), 2.0);
  EXPECT_EQ(error_of([] { ThresholdStopper(ThresholdStopperOptions().dataloader_label("eval").threshold(1.0)); }),
            "ThresholdStopper: monitor is required (a metric name such as 'Accuracy')");
}

TEST(RegistryTest, ErrorsNameTheEntryTheKeyAndWhatWasExpected) {
  const auto& schedulers = optim::scheduler_registry();
  EXPECT_EQ(error_of([&] { schedulers.make("cosine", {}, ""); }).rfind("unknown scheduler 'cosine'; registered: ", 0),
            0u);
  EXPECT_EQ(error_of([&] { schedulers.make("linear_with_warmup", {}, "schedulers.0"); }),
            "schedulers.0.t_warmup: required (the warmup duration)");
  // A misspelt key is reported before the required one it may have meant.
  EXPECT_EQ(error_of([&] {
              schedulers.make("linear_with_warmup", {{"t_warmpu", "1ba"}}, "s");
            }).rfind("s.t_warmpu: unknown", 0),
            0u);
  EXPECT_EQ(error_of([&] {
              schedulers.make("multistep", {{"milestones", "[10ep, lots]"}}, "s");
            }),
            "s.milestones: expected a time such as '2ep' or '100ba', got 'lots'");
  EXPECT_EQ(error_of([&] {
              optim::optimizer_registry().make("adam", {{"betas", "[0.9]"}}, "optimizer",
                                               std::vector<at::Tensor>{torch::zeros({1}, torch::requires_grad())});
            }),
            "optimizer.betas: expected two numbers such as [0.9, 0.999], got '[0.9]'");
  EXPECT_EQ(error_of([] {
              callbacks::callback_registry().make("threshold_stopper", {{"monitor", "Accuracy"}}, "c");
            }),
            "c.dataloader_label: required (the evaluator label, or 'train')");
}

TEST(RegistryTest, SchedulerReprsRecreateTheSameScheduler) {
  const std::map<std::string, std::map<std::string, std::string>> required{
      {"step", {{"step_size", "3ba"}}},
      {"multistep", {{"milestones", "[2ba, 5ba]"}}},
      {"exponential", {{"gamma", "0.5"}}},
      {"cosine_annealing_warm_restarts", {{"t_0", "4ba"}}},
      {"polynomial", {{"power", "1.5"}}},
      {"multistep_with_warmup", {{"t_warmup", "2ba"}, {"milestones", "[6ba]"}}},
      {"constant_with_warmup", {{"t_warmup", "2ba"}}},
      {"linear_with_warmup", {{"t_warmup", "2ba"}}},
      {"cosine_annealing_with_warmup", {{"t_warmup", "2ba"}}},
      {"polynomial_with_warmup", {{"t_warmup", "2ba"}}}};
  const auto& registry = optim::scheduler_registry();
  ASSERT_EQ(registry.entries().size(), 13u);
  State state;
  state.max_duration = Time::from_batch(10);
  state.dataloader_len = 5;
  for (const auto& e : registry.entries()) {
    auto it = required.find(e.name);
    const auto built =
        registry.make(e.name, it == required.end() ? std::map<std::string, std::string>{} : it->second, e.name);
    EXPECT_EQ(built->repr().rfind(e.class_name + "(", 0), 0u) << built->repr();
    const auto again = registry.make_from_repr(built->repr());
    EXPECT_EQ(again->repr(), built->repr());
    for (int64_t b = 0; b <= 10; ++b) {
      state.timestamp.batch = b;
      EXPECT_DOUBLE_EQ((*again)(state), (*built)(state)) << built->repr() << " at batch " << b;
    }
  }
}

TEST(RegistryTest, OptimizersTakeTheirOptionsDefaults) {
  const std::vector<at::Tensor> params{torch::zeros({2}, torch::requires_grad())};
  auto adamw = optim::optimizer_registry().make("decoupled_adamw", {{"lr", "0.01"}}, "", params);
  const auto& o = static_cast<const optim::DecoupledAdamWOptions&>(adamw->param_groups()[0].options());
  EXPECT_DOUBLE_EQ(o.lr(), 0.01);
  EXPECT_DOUBLE_EQ(std::get<1>(o.betas()), 0.95);  // Composer's default
  EXPECT_DOUBLE_EQ(o.weight_decay(), 1e-5);
  auto adam = optim::optimizer_registry().make("adam", {{"betas", "[0.8, 0.9]"}}, "", params);
  EXPECT_DOUBLE_EQ(std::get<0>(static_cast<const torch::optim::AdamOptions&>(adam->defaults()).betas()), 0.8);
  for (const char* name : {"decoupled_sgdw", "decoupled_adamw", "sgd", "adam", "adamw"})
    EXPECT_NE(optim::optimizer_registry().find(name), nullptr) << name;
}

TEST(RegistryTest, CallbacksAndLoggersAreBuiltFromTheirFieldLists) {
  auto monitor = callbacks::callback_registry().make("speed_monitor", {{"window_size", "7"}}, "");
  EXPECT_NE(std::dynamic_pointer_cast<SpeedMonitor>(monitor), nullptr);
  EXPECT_EQ(error_of([] {
              callbacks::callback_registry().make("speed_monitor", {{"time_unit", "fortnights"}}, "");
            }),
            "SpeedMonitor.time_unit 'fortnights' must be one of seconds, minutes, hours, days");
  EXPECT_NE(callbacks::callback_registry().find("LRMonitor"), nullptr);
  auto saver = std::dynamic_pointer_cast<CheckpointSaver>(callbacks::callback_registry().make(
      "checkpoint_saver", {{"folder", "ckpt/{run_name}"}, {"save_interval", "3"}, {"num_checkpoints_to_keep", "2"}},
      "callbacks.0"));
  ASSERT_NE(saver, nullptr);
  EXPECT_EQ(saver->options().folder(), "ckpt/{run_name}");
  EXPECT_EQ(saver->options().save_interval().to_string(), "3ep");  // a bare integer is epochs, as in Composer
  EXPECT_EQ(error_of([] {
              callbacks::callback_registry().make("checkpoint_saver", {{"num_checkpoints_to_keep", "0"}}, "");
            }).rfind("CheckpointSaver.num_checkpoints_to_keep must be -1 (all) or >= 0", 0),
            0u);
  EXPECT_NE(loggers::logger_registry().make("console", {{"log_interval", "1ep"}}, ""), nullptr);
  EXPECT_EQ(error_of([] {
              loggers::logger_registry().make("file", {{"flush_interval", "often"}}, "loggers.0");
            }),
            "loggers.0.flush_interval: expected an integer, got 'often'");
}

TEST(RegistryTest, ModelShapesFollowTheDataUnlessGiven) {
  models::ModelInputs images;
  images.channels = 1;
  images.image_size = 8;
  images.num_classes = 4;
  auto mlp = models::model_registry().make("mlp", {{"hidden", "[16]"}}, "model", images);
  EXPECT_EQ(mlp->forward(Batch(torch::zeros({2, 1, 8, 8}), torch::zeros({2}))).sizes(), torch::IntArrayRef({2, 4}));
  auto wider = models::model_registry().make("mlp", {{"num_classes", "7"}}, "model", images);
  EXPECT_EQ(wider->forward(Batch(torch::zeros({2, 1, 8, 8}), torch::zeros({2}))).size(1), 7);
  EXPECT_EQ(error_of([&] {
              models::model_registry().make("gpt", {{"n_layer", "two"}}, "model", images);
            }),
            "model.n_layer: expected an integer, got 'two'");
  EXPECT_EQ(error_of([&] { models::model_registry().make("vit", {}, "model", images); })
                .rfind("unknown model 'vit'; registered: bert, cifar_resnet, gpt, hf_causal_lm, hf_masked_lm, llama, "
                       "mlp, mnist_cnn, resnet",
                       0),
            0u);
}

// `rope_scaling` is a nested section of the llama model, as in Hugging Face's config.json: the model YAML builds
// computes what a Llama built with the same RopeScaling computes, and a bad rope_type names the key.
TEST(RegistryTest, LlamaTakesRopeScalingFromTheConfig) {
  models::ModelInputs tokens;
  tokens.vocab_size = 40;
  const std::map<std::string, std::string> shape{{"hidden_size", "16"},      {"intermediate_size", "24"},
                                                 {"num_hidden_layers", "1"}, {"num_attention_heads", "2"},
                                                 {"rope_theta", "100"},      {"max_position_embeddings", "64"}};
  auto with = shape;
  with.insert({{"rope_scaling.rope_type", "llama3"},
               {"rope_scaling.factor", "4"},
               {"rope_scaling.original_max_position_embeddings", "8"}});
  const auto config = models::LlamaConfig()
                          .vocab_size(40)
                          .hidden_size(16)
                          .intermediate_size(24)
                          .num_hidden_layers(1)
                          .num_attention_heads(2)
                          .rope_theta(100)
                          .max_position_embeddings(64);
  const auto scaling = models::RopeScaling().rope_type("llama3").factor(4).original_max_position_embeddings(8);
  const at::Tensor ids = torch::arange(12).remainder(40).unsqueeze(0);
  torch::manual_seed(3);
  auto built = models::model_registry().make("llama", with, "model", tokens);
  torch::manual_seed(3);
  models::Llama direct(models::LlamaConfig(config).rope_scaling(scaling));
  torch::manual_seed(3);  // the same weights (the scaling draws nothing)
  models::Llama unscaled(config);
  at::NoGradGuard no_grad;
  built->eval();
  direct.eval();
  unscaled.eval();
  const at::Tensor got = built->forward(Batch({{"input_ids", ids}, {"labels", ids}}));
  EXPECT_TRUE(torch::allclose(got, direct.forward(ids), 1e-6, 1e-6));
  EXPECT_FALSE(torch::allclose(got, unscaled.forward(ids), 1e-4, 1e-4));  // the scaling changed the logits
  auto yarn = shape;
  yarn["rope_scaling.rope_type"] = "yarn";
  EXPECT_NE(
      error_of([&] { models::model_registry().make("llama", yarn, "model", tokens); }).find("rope_scaling.rope_type"),
      std::string::npos);
}

TEST(RegistryTest, DataSetsGiveALoaderAndTheShapesModelsFollow) {
  datasets::DataRequest eval;
  eval.train = false;
  auto images = datasets::dataset_registry().make(
      "synthetic_images", {{"num_samples", "20"}, {"size", "8"}, {"batch_size", "8"}, {"num_workers", "0"}},
      "eval_data", eval);
  EXPECT_EQ(images->image_size, 8);
  EXPECT_EQ(images->num_classes, 10);
  EXPECT_EQ(images->loader->length(), 3);  // 20 samples, batches of 8, the last one partial
  EXPECT_EQ(error_of([&] {
              datasets::dataset_registry().make("synthetic_images", {{"normalize.median", "0.5"}}, "eval_data", eval);
            }).rfind("eval_data.normalize.median: unknown hyperparameter; known: ", 0),
            0u);
  EXPECT_EQ(error_of([&] {
              datasets::dataset_registry().make("synthetic_tokens", {{"split", "val"}}, "d", eval);
            }),
            "d.split: expected 'train' or 'test', got 'val'");
  EXPECT_EQ(error_of([&] {
              datasets::dataset_registry().make("synthetic_images", {{"batch_size", "0"}}, "d", eval);
            }),
            "d.batch_size: expected a positive integer, got '0'");
}

// docs/registry.md holds each entry's table as the field list gives it. To rewrite it after changing a field:
// COMPOSER_WRITE_DOCS=1 ./build/tests/core_test --gtest_filter=RegistryTest.DocsPageIsTheFieldLists
std::string registry_page() {
  std::string page =
      "# The registries\n\n"
      "Every data set, model, loss, scheduler, optimizer, callback and logger a YAML config (or `make(name, hparams)`) "
      "can "
      "name, with "
      "its\n"
      "hyperparameters, defaults and meaning. This page is written from the options' field lists and checked by\n"
      "`RegistryTest.DocsPageIsTheFieldLists`; the algorithms have their own pages under `docs/algorithms/`. A\n"
      "default of `None` marks a required hyperparameter.\n";
  const auto section = [&](const std::string& title, const std::vector<RegisteredName>& listing) {
    page += "\n## " + title + "\n";
    for (const auto& e : listing) {
      page += "\n### `" + e.name + "`: " + e.class_name + "\n\n" + e.summary + ".\n";
      if (!e.fields.empty()) page += "\n" + fields_table(e.fields);
    }
  };
  section("Data sets", datasets::dataset_registry().listing());
  section("Models", models::model_registry().listing());
  section("Losses", loss_registry().listing());
  section("Schedulers", optim::scheduler_registry().listing());
  section("Optimizers", optim::optimizer_registry().listing());
  section("Callbacks", callbacks::callback_registry().listing());
  section("Loggers", loggers::logger_registry().listing());
  return page;
}

TEST(RegistryTest, DocsPageIsTheFieldLists) {
  const auto path = std::filesystem::path(testing::source_dir()) / "docs" / "registry.md";
  const std::string expected = registry_page();
  if (std::getenv("COMPOSER_WRITE_DOCS")) std::ofstream(path) << expected;
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " is missing";
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(page, expected) << path << " is out of date; rewrite it with COMPOSER_WRITE_DOCS=1 (see the test)";
}

}  // namespace
}  // namespace composer
