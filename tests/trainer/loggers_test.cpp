#include "support/run_files.h"
#include "support/test_support.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace composer {
namespace {

namespace fs = std::filesystem;

TEST(ConsoleLoggerTest, ComposerFormat) {
  std::ostringstream out;
  auto console =
      std::make_shared<ConsoleLogger>(ConsoleLoggerOptions().log_interval(Time(2, TimeUnit::BATCH)).stream(&out));
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
                      .eval_dataloader(testing::make_loader(testing::make_blobs(8), 8, false))
                      .max_duration("1ep")
                      .loggers({console}));
  trainer.fit();
  const std::string s = out.str();
  EXPECT_NE(s.find(std::string(30, '*') + "\nConfig:\n"), std::string::npos) << s;
  EXPECT_NE(s.find("rank_zero_seed: 42"), std::string::npos) << s;
  EXPECT_NE(s.find("[epoch=1][batch=2/4]:\n"), std::string::npos) << s;
  EXPECT_NE(s.find("\t Train loss/train/total: "), std::string::npos) << s;
  EXPECT_EQ(s.find("[epoch=1][batch=1/4]"), std::string::npos) << s;  // interval 2ba
  EXPECT_NE(s.find("[Eval batch=1/1] Eval on eval data"), std::string::npos) << s;
  EXPECT_NE(s.find("\t Eval metrics/eval/Accuracy: "), std::string::npos) << s;
}

// Composer's auto_log_hparams: the options' field list as hyperparameters, objects by repr or class name.
TEST(HyperparametersTest, AutoLogHparamsLogsTheFieldList) {
  for (bool enabled : {false, true}) {
    auto mem = std::make_shared<InMemoryLogger>();
    Trainer trainer(testing::quiet_options(testing::make_classifier())
                        .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                        .max_duration("2ba")
                        .eval_interval("3ep")
                        .schedulers({std::make_shared<CosineAnnealingWithWarmupScheduler>(Time::from_batch(1))})
                        .algorithms({std::make_shared<algorithms::LabelSmoothing>()})
                        .auto_log_hparams(enabled)
                        .loggers({mem}));
    const auto& h = mem->hyperparameters;
    EXPECT_TRUE(h.contains("rank_zero_seed"));
    if (!enabled) {
      EXPECT_FALSE(h.contains("max_duration")) << h.dump();
      continue;
    }
    EXPECT_EQ(h.at("max_duration"), "2ba") << h.dump();
    EXPECT_EQ(h.at("eval_interval"), "3ep");
    EXPECT_EQ(h.at("scale_schedule_ratio"), 1.0);
    EXPECT_EQ(h.at("save_folder"), "");
    EXPECT_EQ(h.at("load_ignore_keys"), nlohmann::json::array());
    EXPECT_EQ(h.at("schedulers").at(0),
              "CosineAnnealingWithWarmupScheduler(t_warmup='1ba', t_max='1.0dur', alpha_f=0.0, scale_warmup=False)");
    EXPECT_EQ(h.at("algorithms").at(0).get<std::string>().rfind("LabelSmoothing(smoothing=0.1", 0), 0u) << h.dump();
    EXPECT_EQ(h.at("model"), "ComposerClassifier");
  }
}

TEST(FileLoggerTest, WritesJsonLinesAndRefusesToOverwrite) {
  const fs::path dir = testing::fresh_dir("file_logger");
  const std::string filename = (dir / "{run_name}" / "log-{rank}.jsonl").string();
  {
    auto file = std::make_shared<FileLogger>(FileLoggerOptions().filename(filename));
    Trainer trainer(testing::quiet_options(testing::make_classifier())
                        .run_name("jsonl")
                        .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                        .max_duration("2ba")
                        .loggers({file}));
    trainer.fit();
  }
  const fs::path path = dir / "jsonl" / "log-0.jsonl";
  ASSERT_TRUE(fs::exists(path));
  std::ifstream in(path);
  std::string line;
  int metrics_lines = 0, hparams_lines = 0;
  std::vector<double> losses;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);  // every line is valid JSON
    if (j["type"] == "hparams") ++hparams_lines;
    if (j["type"] == "metrics") {
      ++metrics_lines;
      if (j["data"].contains("loss/train/total")) losses.push_back(j["data"]["loss/train/total"].get<double>());
    }
  }
  EXPECT_GE(hparams_lines, 1);
  EXPECT_GT(metrics_lines, 0);
  EXPECT_EQ(losses.size(), 2u);
  auto again = std::make_shared<FileLogger>(FileLoggerOptions().filename(filename));
  try {
    Trainer t(testing::quiet_options(testing::make_classifier()).run_name("jsonl").loggers({again}));
    FAIL() << "expected an error for an existing log file";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("log-0.jsonl"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(ProgressBarLoggerTest, PlainLinesWhenNotATty) {
  const fs::path dir = testing::fresh_dir("progress");
  const fs::path path = dir / "bar.txt";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  {
    auto bar = std::make_shared<ProgressBarLogger>(f, /*force_tty=*/0);
    Trainer trainer(testing::quiet_options(testing::make_classifier())
                        .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                        .eval_dataloader(testing::make_loader(testing::make_blobs(8), 8, false))
                        .max_duration("2ep")
                        .loggers({bar}));
    trainer.fit();
  }
  std::fclose(f);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  EXPECT_EQ(s.find('\r'), std::string::npos) << s;  // no carriage returns in a file
  EXPECT_NE(s.find("[epoch 1] 2/2 [========================]"), std::string::npos) << s;
  EXPECT_NE(s.find("[epoch 2] 2/2"), std::string::npos) << s;
  // An evaluation's bar per run, labelled as Composer labels it, ending with its metrics.
  EXPECT_NE(s.find("[eval eval | epoch 1] 1/1 [========================]"), std::string::npos) << s;
  EXPECT_NE(s.find("[eval eval | epoch 2] 1/1"), std::string::npos) << s;
  EXPECT_NE(s.find("metrics/eval/Accuracy="), std::string::npos) << s;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace composer
