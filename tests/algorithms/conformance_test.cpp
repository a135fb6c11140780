// Conformance over the registry: every algorithm constructs with defaults, matches only its events, keeps its state
// through a checkpoint, trains a step on a tiny model, and agrees with its functional form.
#include "algorithms/algo_support.h"
#include "support/data_paths.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

using namespace composer;
using composer::testing::tiny_convnet;
using composer::testing::tiny_image_loader;

namespace {

const std::map<std::string, std::set<Event>>& expected_events() {
  static const std::map<std::string, std::set<Event>> e{
      {"alibi", {Event::INIT, Event::AFTER_DATALOADER}},
      {"augmix", {Event::FIT_START}},
      {"blurpool", {Event::INIT}},
      {"channels_last", {Event::INIT}},
      {"colout", {Event::AFTER_DATALOADER}},
      {"cutmix", {Event::BEFORE_FORWARD, Event::BEFORE_LOSS}},
      {"cutout", {Event::AFTER_DATALOADER}},
      // EMA starts averaging at its first BATCH_END after ema_start (0dur), then also swaps weights at the evaluation
      // and prediction events that follow in declaration order.
      {"ema", {Event::INIT, Event::BATCH_END, Event::EVAL_START, Event::EVAL_END, Event::PREDICT_START}},
      {"factorize", {Event::INIT}},
      {"gated_linear_units", {Event::INIT}},
      {"ghost_batchnorm", {Event::INIT}},
      {"seq_length_warmup", {Event::INIT, Event::AFTER_DATALOADER}},
      {"gradient_clipping", {Event::INIT, Event::AFTER_TRAIN_BATCH}},
      {"gyro_dropout", {Event::FIT_START}},
      {"label_smoothing", {Event::BEFORE_LOSS, Event::AFTER_LOSS}},
      {"layer_freezing", {Event::EPOCH_END}},
      {"low_precision_groupnorm", {Event::INIT}},
      {"low_precision_layernorm", {Event::INIT}},
      {"mixup", {Event::BEFORE_FORWARD, Event::BEFORE_LOSS}},
      {"no_op_model", {Event::INIT}},
      {"progressive_resizing", {Event::AFTER_DATALOADER}},
      {"randaugment", {Event::FIT_START}},
      {"sam", {Event::AFTER_LOAD}},
      // Batch 3 of 10 is before SelectiveBackprop's start (0.5) and SWA's (0.7dur): INIT only.
      {"selective_backprop", {Event::INIT}},
      {"squeeze_excite", {Event::INIT}},
      {"stochastic_depth", {Event::INIT}},
      {"swa", {Event::INIT}},
      {"weight_standardization", {Event::INIT}},
  };
  return e;
}

std::shared_ptr<ComposerClassifier> tiny_model(uint64_t seed = 0) {
  return ComposerClassifier::wrap(tiny_convnet(seed));
}

TrainerOptions tiny_run(std::shared_ptr<ComposerModel> model, std::shared_ptr<Algorithm> algorithm,
                        bool tokens = false) {
  std::shared_ptr<DataLoader> loader = tokens ? std::shared_ptr<DataLoader>(composer::testing::tiny_token_loader())
                                              : std::shared_ptr<DataLoader>(tiny_image_loader());
  return composer::testing::quiet_options(std::move(model))
      .train_dataloader(loader)
      .max_duration(Time::from_batch(2))
      .algorithms({std::move(algorithm)});
}

std::vector<at::Tensor> weights(torch::nn::Module& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

class Conformance : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST(AlgorithmRegistryTest, ListsEveryMethod) {
  std::vector<std::string> expected;
  for (const auto& [name, events] : expected_events()) expected.push_back(name);
  EXPECT_EQ(composer::testing::registered_algorithms(), expected);
  EXPECT_EQ(algorithms::make_algorithm("BlurPool")->name(), "BlurPool");
  try {
    algorithms::make_algorithm("blurpol");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown algorithm 'blurpol'; registered: alibi, augmix, blurpool"),
              std::string::npos);
  }
  try {
    algorithms::make_algorithm("mixup", {{"alpah", "0.3"}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("mixup.alpah: unknown hyperparameter; known:"), std::string::npos) << e.what();
  }
  EXPECT_THROW(algorithms::make_algorithm("mixup", {{"alpha", "lots"}}), std::invalid_argument);
  EXPECT_THROW(algorithms::make_algorithm("mixup", {{"alpha", "-1"}}), std::invalid_argument);
  EXPECT_THROW(algorithms::make_algorithm("colout", {{"resize_target", "maybe"}}), std::invalid_argument);
  EXPECT_EQ(algorithms::make_algorithm("cutout", {{"num_holes", "2"}, {"length", "0.25"}})->repr(),
            "CutOut(num_holes=2, length=0.25, uniform_sampling=False, input_key=0)");
  EXPECT_EQ(algorithms::make_algorithm("stochastic_depth",
                                       {{"stochastic_method", "SAMPLE"}, {"drop_distribution", "uniform"}})
                ->repr(),
            "StochasticDepth(target_layer_name='ResNetBottleneck', stochastic_method='sample', drop_rate=0.2, "
            "drop_distribution='uniform', drop_warmup=0.0)");
  EXPECT_EQ(algorithms::make_algorithm("mixup", {{"input_key", "image"}, {"target_key", "3"}})->repr(),
            "MixUp(alpha=0.2, interpolate_loss=False, input_key='image', target_key=3)");
  try {
    algorithms::make_algorithm("progressive_resizing", {{"mode", "stretch"}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("progressive_resizing.mode: expected one of resize, crop, got 'stretch'"),
              std::string::npos)
        << e.what();
  }
}

TEST_P(Conformance, ConstructsWithDefaultsAndMatchesOnlyItsEvents) {
  auto algorithm = composer::testing::make_example(GetParam());
  const auto& entry = *std::find_if(algorithms::algorithm_registry().entries().begin(),
                                    algorithms::algorithm_registry().entries().end(),
                                    [&](const auto& e) { return e.name == GetParam(); });
  EXPECT_EQ(algorithm->name(), entry.class_name);
  EXPECT_EQ(algorithm->repr().rfind(entry.class_name + "(", 0), 0u) << algorithm->repr();
  EXPECT_EQ(algorithms::make_algorithm_from_repr(algorithm->repr())->repr(),
            algorithm->repr());  // checkpoints re-create it
  State state;
  state.max_duration = Time::from_batch(10);
  state.timestamp.batch = 3;
  const auto& events = expected_events().at(GetParam());
  for (Event e : all_events()) EXPECT_EQ(algorithm->match(e, state), events.count(e) > 0) << event_name(e);
}

// The field list is the one source of each hyperparameter: the repr lists every field with the value the options
// hold, and a repr re-creates equal options.
TEST_P(Conformance, FieldListDrivesReprAndParsing) {
  const auto& entry = *algorithms::find_algorithm(GetParam());
  std::string expected = entry.class_name + "(";
  for (size_t i = 0; i < entry.fields.size(); ++i) {
    expected += (i ? ", " : "") + entry.fields[i].name + "=" + entry.fields[i].value;
    EXPECT_FALSE(entry.fields[i].doc.empty()) << entry.fields[i].name;
  }
  const auto required = std::find_if(entry.fields.begin(), entry.fields.end(),
                                     [](const FieldDoc& f) { return f.doc.rfind("required: ", 0) == 0; });
  if (required != entry.fields.end()) {
    // Required arguments (no default): building without them names the first one.
    const std::string first = required->name;
    try {
      algorithms::make_algorithm(GetParam());
      FAIL() << GetParam() << " built without its required " << first;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(GetParam() + "." + first + ": required", 0), 0u) << e.what();
    }
    return;
  }
  EXPECT_EQ(algorithms::make_algorithm(GetParam())->repr(), expected + ")");
}

// Each docs page's hyperparameter table is the field list's table (regenerate it from the message below).
TEST_P(Conformance, DocsTableIsTheFieldList) {
  const auto& entry = *algorithms::find_algorithm(GetParam());
  std::ifstream in(std::filesystem::path(composer::testing::source_dir()) / "docs" / "algorithms" /
                   (GetParam() + ".md"));
  ASSERT_TRUE(in) << "docs/algorithms/" << GetParam() << ".md is missing";
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string table = fields_table(entry.fields);
  EXPECT_NE(page.find("## Hyperparameters (Composer's defaults)\n" + table), std::string::npos)
      << "docs/algorithms/" << GetParam()
      << ".md: the table after '## Hyperparameters (Composer's defaults)' should be:\n"
      << table;
}

TEST_P(Conformance, TrainsAStepAndKeepsItsStateThroughACheckpoint) {
  const auto dir = std::filesystem::temp_directory_path() / ("conformance_" + GetParam());
  std::filesystem::remove_all(dir);
  const bool tokens = composer::testing::is_language_algorithm(GetParam());
  std::shared_ptr<ComposerModel> model = tokens ? composer::testing::tiny_gpt() : tiny_model();
  const auto before = weights(*model);
  Trainer trainer(tiny_run(model, composer::testing::make_example(GetParam()), tokens));
  trainer.fit();
  EXPECT_TRUE(std::isfinite(trainer.state().total_loss_dict.at("loss/train/total")));
  const auto after = weights(*trainer.state().model);  // NoOpModel puts another model there
  bool changed = after.size() != before.size();
  for (size_t i = 0; !changed && i < after.size(); ++i) changed = !torch::equal(after[i], before[i]);
  EXPECT_TRUE(changed) << "no parameter moved";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "ep0.pt").string();
  save_checkpoint(trainer.state(), path);

  std::shared_ptr<ComposerModel> fresh_model =
      tokens ? composer::testing::tiny_gpt(1)
             : tiny_model(1);  // different weights, same structure once the algorithm has run at INIT
  auto algorithm = composer::testing::make_example(GetParam());
  Trainer resumed(tiny_run(fresh_model, algorithm, tokens));
  apply_checkpoint(resumed.state(), read_checkpoint(path), CheckpointLoadOptions(), path);
  EXPECT_EQ(algorithm->state_dict().toGenericDict().at("repr").toStringRef(),
            trainer.state().algorithms.at(0)->state_dict().toGenericDict().at("repr").toStringRef());
  const auto loaded = weights(*resumed.state().model);
  ASSERT_EQ(loaded.size(), after.size());
  for (size_t i = 0; i < loaded.size(); ++i) EXPECT_TRUE(torch::equal(loaded[i], after[i]));
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Registry, Conformance, ::testing::ValuesIn(composer::testing::registered_algorithms()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(RequiredOnLoadTest, SurgeryFromTheCheckpointIsRedoneBeforeItsWeightsLoad) {
  const auto dir = std::filesystem::temp_directory_path() / "required_on_load";
  std::filesystem::remove_all(dir);
  auto model = tiny_model();
  Trainer trainer(
      composer::testing::quiet_options(model)
          .train_dataloader(tiny_image_loader())
          .max_duration(Time::from_batch(2))
          .algorithms({algorithms::make_algorithm("blurpool"),
                       algorithms::make_algorithm("squeeze_excite", {{"min_channels", "16"}, {"latent_channels", "4"}}),
                       algorithms::make_algorithm("label_smoothing")})
          .save_folder(dir.string())
          .save_interval(Time::from_batch(2)));
  trainer.fit();
  const std::string path = (dir / "ep0-ba2-rank0.pt").string();
  ASSERT_TRUE(std::filesystem::exists(path));

  auto plain = tiny_model(1);
  Trainer loaded(composer::testing::quiet_options(plain).train_dataloader(tiny_image_loader()).load_path(path));
  EXPECT_EQ(count_module_instances<nn::BlurConv2d>(*plain), 1);
  EXPECT_EQ(count_module_instances<nn::SqueezeExciteConv2d>(*plain), 1);
  std::vector<std::string> names;
  for (const auto& a : loaded.state().algorithms) names.push_back(a->name());
  EXPECT_EQ(names,
            (std::vector<std::string>{"BlurPool", "SqueezeExcite"}));  // LabelSmoothing does not change the model
  const auto a = weights(*model), b = weights(*plain);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i]));
  std::filesystem::remove_all(dir);
}

TEST(RequiredOnLoadTest, ExcludedAlgorithmsAreNotRecreated) {
  const auto dir = std::filesystem::temp_directory_path() / "required_on_load_excluded";
  std::filesystem::remove_all(dir);
  Trainer trainer(composer::testing::quiet_options(tiny_model())
                      .train_dataloader(tiny_image_loader())
                      .max_duration(Time::from_batch(1))
                      .algorithms({algorithms::make_algorithm("blurpool"),
                                   algorithms::make_algorithm("squeeze_excite",
                                                              {{"min_channels", "16"}, {"latent_channels", "4"}})})
                      .save_folder(dir.string())
                      .save_interval(Time::from_batch(1)));
  trainer.fit();
  const std::string path = (dir / "ep0-ba1-rank0.pt").string();

  auto plain = tiny_model(1);
  Trainer loaded(composer::testing::quiet_options(plain)
                     .train_dataloader(tiny_image_loader())
                     .load_path(path)
                     .load_exclude_algorithms({"SqueezeExcite"})
                     .load_weights_only(true)
                     .load_strict_model_weights(false));
  EXPECT_EQ(count_module_instances<nn::BlurConv2d>(*plain), 1);
  EXPECT_EQ(count_module_instances<nn::SqueezeExciteConv2d>(*plain), 0);
  ASSERT_EQ(loaded.state().algorithms.size(), 1u);
  EXPECT_EQ(loaded.state().algorithms[0]->name(), "BlurPool");

  // Without it, strict loading names the keys the model lacks instead of loading part of the checkpoint.
  auto strict = tiny_model(1);
  try {
    Trainer refused(composer::testing::quiet_options(strict)
                        .train_dataloader(tiny_image_loader())
                        .load_path(path)
                        .load_exclude_algorithms({"SqueezeExcite"})
                        .load_weights_only(true));
    FAIL() << "a checkpoint with squeeze-excite weights loaded into a model without them";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(RequiredOnLoadTest, ReprsParseAndBadOnesAreNamed) {
  auto a = algorithms::make_algorithm_from_repr(
      "BlurPool(replace_convs=True, replace_maxpools=False, blur_first=True, min_channels=8)");
  EXPECT_EQ(a->repr(), "BlurPool(replace_convs=True, replace_maxpools=False, blur_first=True, min_channels=8)");
  EXPECT_EQ(algorithms::make_algorithm_from_repr("ChannelsLast()")->name(), "ChannelsLast");
  EXPECT_EQ(algorithms::make_algorithm_from_repr(algorithms::make_algorithm("colout")->repr())->repr(),
            algorithms::make_algorithm("colout")->repr());
  try {
    algorithms::make_algorithm_from_repr("BlurPool(min_channels=lots)");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("algorithm repr 'BlurPool(min_channels=lots)'"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(algorithms::make_algorithm_from_repr("BlurPool"), std::invalid_argument);
  EXPECT_THROW(algorithms::make_algorithm_from_repr("Nope(x=1)"), std::invalid_argument);
}
