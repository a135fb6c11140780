// TensorboardLogger, read back by the real tensorboard package (tests/trainer/tensorboard_read.py).
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

/// At batch 2: logs a [3, 1, 4, 5] image batch and a table through the trainer's Logger.
class LogImagesAndTable : public Callback {
 public:
  at::Tensor images = at::linspace(0, 1, 60).reshape({3, 1, 4, 5});
  void batch_end(State& state, Logger& logger) override {
    if (state.timestamp.batch != 2) return;
    logger.log_images(images, "Images");
    logger.log_table({"prompt", "tokens"}, {{"a cat", 3}, {"sat", 1.5}}, "Generations");
  }
};

/// Records what Logger::upload_file sends.
class Uploads : public LoggerDestination {
 public:
  bool can_upload_files() const override { return true; }
  void upload_file(const std::string& remote, const std::string& local, bool overwrite) override {
    uploads.push_back({remote, local, overwrite ? "overwrite" : ""});
  }
  std::vector<std::vector<std::string>> uploads;
};

nlohmann::json read_back(const fs::path& run_dir) {
  const auto py = testing::run_python({testing::source_dir() + "/tests/trainer/tensorboard_read.py", run_dir.string()});
  EXPECT_EQ(py.status, 0) << py.output;
  const size_t line = py.output.rfind("\n{\"files\"");  // the JSON is the last line; warnings may precede it
  return nlohmann::json::parse(py.output.substr(line == std::string::npos ? 0 : line + 1));
}

TEST(TensorboardLoggerTest, TensorBoardReadsScalarsHparamsImagesAndTables) {
  COMPOSER_REQUIRE_PYTHON("tensorboard PIL");
  const fs::path dir = testing::fresh_dir("tb_read");
  auto tb = std::make_shared<TensorboardLogger>(TensorboardLoggerOptions().log_dir(dir.string()).flush_interval(2));
  auto mem = std::make_shared<InMemoryLogger>();
  auto uploads = std::make_shared<Uploads>();
  auto logs = std::make_shared<LogImagesAndTable>();
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
                      .eval_dataloader(testing::make_loader(testing::make_blobs(8), 8, false))
                      .max_duration("1ep")
                      .run_name("tbrun")
                      .callbacks({logs})
                      .loggers({tb, mem, uploads}));
  trainer.fit();
  const std::string event_file = tb->event_file();
  ASSERT_FALSE(event_file.empty());
  EXPECT_EQ(fs::path(event_file).parent_path(), dir / "tbrun");
  trainer.close();

  const nlohmann::json r = read_back(dir / "tbrun");
  EXPECT_EQ(r["files"], 1) << r.dump();
  EXPECT_EQ(r["file_versions"], nlohmann::json::array({"brain.Event:2"}));

  // Scalars: every key the trainer logged, at its batch, with its value (as a float32).
  const auto losses = mem->data.at("loss/train/total");
  ASSERT_EQ(r["scalars"]["loss/train/total"].size(), losses.size()) << r["scalars"].dump();
  for (size_t i = 0; i < losses.size(); ++i) {
    EXPECT_EQ(r["scalars"]["loss/train/total"][i][0], losses[i].first.batch);
    EXPECT_FLOAT_EQ(r["scalars"]["loss/train/total"][i][1].get<float>(), static_cast<float>(losses[i].second));
  }
  EXPECT_FLOAT_EQ(r["scalars"]["metrics/eval/Accuracy"][0][1].get<float>(),
                  static_cast<float>(mem->most_recent_values.at("metrics/eval/Accuracy")));

  // Images: three 4x5 gray images tiled in a row as RGB, floats scaled by 255 and truncated.
  const auto& img = r["images"]["Images"].at(0);
  EXPECT_EQ(img["step"], 2);
  EXPECT_EQ(img["width"], 15);
  EXPECT_EQ(img["height"], 4);
  EXPECT_EQ(img["mode"], "RGB");
  const int second = static_cast<int>(logs->images.flatten()[1].item<float>() * 255.0f);
  EXPECT_EQ(img["pixels"][1], nlohmann::json::array({second, second, second}));

  // The table: Markdown in the text plugin.
  const auto& text = r["text"]["Generations/text_summary"].at(0);
  EXPECT_EQ(text[0], 2);
  EXPECT_EQ(text[1], "| prompt | tokens |\n| --- | --- |\n| a cat | 3 |\n| sat | 1.5 |");

  // Hyperparameters: Composer's formatted strings, with the loss and metric keys, in <run>/<run>/.
  bool experiment = false, start = false, end = false, scalar = false;
  for (const auto& h : r["hparams"]) {
    EXPECT_EQ(h["dir"], "tbrun");
    if (h.contains("experiment")) {
      experiment = true;
      EXPECT_NE(h["experiment"]["hparams"].dump().find("[\"rank_zero_seed\",1]"), std::string::npos) << h.dump();
      const auto metrics = h["experiment"]["metrics"].dump();
      EXPECT_NE(metrics.find("hparams/loss/train/total"), std::string::npos) << metrics;
      EXPECT_NE(metrics.find("hparams/metrics/eval/Accuracy"), std::string::npos) << metrics;
    }
    if (h.contains("start")) {
      start = true;
      EXPECT_EQ(h["start"]["rank_zero_seed"], "42") << h.dump();
      EXPECT_EQ(h["start"]["run_name"], "\"tbrun\"") << h.dump();
    }
    if (h.contains("end")) end = h["end"] == 1;
    if (h.contains("scalar") && h["scalar"] == "hparams/metrics/eval/Accuracy") scalar = true;
  }
  EXPECT_TRUE(experiment && start && end && scalar) << r["hparams"].dump();

  // Each flush hands the event file to the uploading destinations, under Composer's remote name.
  ASSERT_FALSE(uploads->uploads.empty());
  const std::string remote = "tensorboard_logs/tbrun/" + fs::path(event_file).stem().string() + "-0";
  EXPECT_EQ(uploads->uploads.back(), (std::vector<std::string>{remote, event_file, "overwrite"}));
  fs::remove_all(dir);
}

TEST(TensorboardLoggerTest, BadInputsAreClearErrors) {
  EXPECT_THROW(TensorboardLogger(TensorboardLoggerOptions().flush_interval(0)), std::invalid_argument);
  EXPECT_THROW(TensorboardLogger(TensorboardLoggerOptions().log_dir("")), std::invalid_argument);

  const fs::path dir = testing::fresh_dir("tb_bad");
  auto tb = std::make_shared<TensorboardLogger>(TensorboardLoggerOptions().log_dir(dir.string()));
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                      .max_duration("1ba")
                      .run_name("bad")
                      .loggers({tb}));
  const auto message = [&](const at::Tensor& t) {
    try {
      tb->log_images(t, "Masks", 0);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(at::zeros({2, 2, 2}, at::kInt)),
            "TensorboardLogger.log_images 'Masks': dtype Int, expected a float type (0..1) or uint8");
  EXPECT_EQ(message(at::zeros({2, 5, 4, 4})),
            "TensorboardLogger.log_images 'Masks': shape [2, 5, 4, 4] has 5 channels, expected 1 or 3");
  EXPECT_EQ(message(at::zeros({4})),
            "TensorboardLogger.log_images 'Masks': shape [4], expected [H, W], [C, H, W] or [N, C, H, W]");
  trainer.close();

  // A log_dir that is a file: the error names the folder, and the file is untouched.
  const fs::path file = dir / "not_a_dir";
  { std::ofstream(file) << "keep"; }
  auto blocked = std::make_shared<TensorboardLogger>(TensorboardLoggerOptions().log_dir(file.string()));
  try {
    Trainer t(testing::quiet_options(testing::make_classifier())
                  .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                  .max_duration("1ba")
                  .run_name("blocked")
                  .loggers({blocked}));
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create log folder '" + (file / "blocked").string() + "'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(testing::read_text(file.string()), "keep");
  fs::remove_all(dir);
}

TEST(LogTableTest, RowsMustMatchTheColumns) {
  auto mem = std::make_shared<InMemoryLogger>();
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                      .max_duration("1ba")
                      .loggers({mem}));
  Logger logger(trainer.state(), {mem});
  try {
    logger.log_table({"a", "b"}, {{1, 2}, {3}}, "T");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "log_table 'T': row 1 has 1 values, expected one per column (2)");
  }
  EXPECT_TRUE(mem->tables.empty());
  logger.log_table({"a", "b"}, {{1, "x"}}, "T");
  EXPECT_EQ(mem->tables.at("T").dump(), R"({"columns":["a","b"],"data":[[1,"x"]]})");
}

TEST(FormatLogDataValueTest, AsComposer) {
  EXPECT_EQ(format_log_data_value("adam"), "\"adam\"");
  EXPECT_EQ(format_log_data_value(3), "3");
  EXPECT_EQ(format_log_data_value(0.1), "0.1000");
  EXPECT_EQ(format_log_data_value(true), "True");
  EXPECT_EQ(format_log_data_value(nullptr), "None");
  EXPECT_EQ(format_log_data_value(nlohmann::json::array({1, "a"})), "[1, \"a\"]");
  EXPECT_EQ(format_log_data_value(nlohmann::json{{"lr", 0.5}}), "{ \"lr\": 0.5000, }");
}

}  // namespace
}  // namespace composer
