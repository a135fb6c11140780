// MLFlowLogger against a real MLflow tracking server started here on loopback, read back with MLflow's own client
// (tests/trainer/mlflow_read.py).
#include "support/mlflow_server.h"
#include "support/process.h"
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

using testing::MlflowServer;

/// Logs a table and two images at batch 1; fails the run at the start of batch `fail_at` (after its checkpoint).
class TableImagesAndCrash : public Callback {
 public:
  explicit TableImagesAndCrash(int64_t fail_at) : fail_at_(fail_at) {}
  void batch_end(State& state, Logger& logger) override {
    if (state.timestamp.batch != 1) return;
    logger.log_table({"prompt", "tokens"}, {{"Call me", 2}, {"Ishmael", 1}}, "Generations");
    logger.log_images(at::rand({2, 3, 4, 5}), "Samples");
  }
  void batch_start(State& state, Logger&) override {
    if (state.timestamp.batch == fail_at_) throw std::runtime_error("simulated crash");
  }

 private:
  int64_t fail_at_;
};

nlohmann::json read_back(const std::string& url, const fs::path& dir) {
  const auto py = testing::run_python({testing::source_dir() + "/tests/trainer/mlflow_read.py", "read", url,
                                       "composer-cpp-test", "mlrun", (dir / "download").string()});
  EXPECT_EQ(py.status, 0) << py.output;
  const size_t line = py.output.rfind("\n{\"experiment_id\"");
  return nlohmann::json::parse(py.output.substr(line == std::string::npos ? 0 : line + 1));
}

TrainerOptions run_options(const fs::path& dir, std::shared_ptr<MLFlowLogger> mlflow,
                           std::shared_ptr<InMemoryLogger> mem, std::shared_ptr<Callback> extra) {
  return testing::quiet_options(testing::make_classifier())
      .train_dataloader(testing::make_loader(testing::make_blobs(32), 8, false))
      .max_duration("4ba")
      .run_name("mlrun")
      .save_folder((dir / "ckpt").string())
      .save_interval("1ba")
      .autoresume(true)
      .callbacks({extra})
      .loggers({mlflow, mem});
}

// A run that crashes after batch 2 and autoresumes continues the same MLflow run: one run, FAILED then FINISHED,
// every batch's loss once at its step, the hyperparameters as params, the tags, each checkpoint as an artifact
// (byte for byte), the table and the images.
TEST(MLFlowLoggerTest, RealServerKeepsOneRunThroughAutoresume) {
  COMPOSER_REQUIRE_PYTHON("mlflow");
  const fs::path dir = testing::fresh_dir("mlflow_resume");
  MlflowServer server(dir);
  const auto ready =
      testing::run_python({testing::source_dir() + "/tests/trainer/mlflow_read.py", "wait", server.url()});
  ASSERT_EQ(ready.status, 0) << ready.output << testing::read_text((dir / "server.log").string());

  const auto options = [&] {
    return MLFlowLoggerOptions()
        .tracking_uri(server.url())
        .experiment_name("composer-cpp-test")
        .resume(true)
        .run_group("sweep-1")
        .tags({{"team", "robotics"}})
        .flush_interval(0);
  };
  auto mem1 = std::make_shared<InMemoryLogger>();
  std::string first_run_id;
  {
    auto mlflow = std::make_shared<MLFlowLogger>(options());
    Trainer trainer(run_options(dir, mlflow, mem1, std::make_shared<TableImagesAndCrash>(2)));
    first_run_id = mlflow->run_id();
    EXPECT_THROW(trainer.fit(), std::runtime_error);
  }
  nlohmann::json r = read_back(server.url(), dir);
  ASSERT_EQ(r["runs"].size(), 1u) << r.dump();
  EXPECT_EQ(r["runs"][0]["status"], "FAILED");

  auto mem2 = std::make_shared<InMemoryLogger>();
  {
    auto mlflow = std::make_shared<MLFlowLogger>(options());
    Trainer trainer(run_options(dir, mlflow, mem2, std::make_shared<TableImagesAndCrash>(-1)));
    EXPECT_EQ(mlflow->run_id(), first_run_id);
    EXPECT_EQ(trainer.state().timestamp.batch, 2);  // autoresumed from the batch-2 checkpoint
    trainer.fit();
  }
  r = read_back(server.url(), dir);
  ASSERT_EQ(r["runs"].size(), 1u) << r.dump();
  const auto& run = r["runs"][0];
  EXPECT_EQ(run["run_id"], first_run_id);
  EXPECT_EQ(run["status"], "FINISHED");
  EXPECT_EQ(run["name"], "mlrun");
  EXPECT_EQ(run["tags"]["run_name"], "mlrun");
  EXPECT_EQ(run["tags"]["run_group"], "sweep-1");
  EXPECT_EQ(run["tags"]["team"], "robotics");
  EXPECT_EQ(run["tags"]["mlflow.loggedImages"], "True");
  EXPECT_EQ(run["params"]["rank_zero_seed"], "42");
  EXPECT_EQ(run["params"]["run_name"], "mlrun");
  EXPECT_EQ(run["params"]["mlflow_run_id"], first_run_id);
  EXPECT_EQ(run["params"]["mlflow_experiment_id"], r["experiment_id"]);

  // Batches 1-2 from the first process, 3-4 from the second, each once; as in Composer the loss is logged before the
  // batch count moves on, so at steps 0-3.
  std::vector<std::pair<int64_t, double>> expected;
  for (const auto& mem : {mem1, mem2})
    for (const auto& [ts, v] : mem->data.at("loss/train/total")) expected.emplace_back(ts.batch, v);
  const auto& losses = run["metrics"]["loss/train/total"];
  ASSERT_EQ(losses.size(), 4u) << losses.dump();
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(losses[i][0], int64_t(i));
    EXPECT_EQ(losses[i][0], expected[i].first);
    EXPECT_DOUBLE_EQ(losses[i][1].get<double>(), expected[i].second);
  }

  // Artifacts: every checkpoint, the table, two PNGs.
  std::map<std::string, nlohmann::json> files;
  for (const auto& a : run["artifacts"]) files[a["path"]] = a;
  for (int b = 1; b <= 4; ++b) {
    const std::string name = "ep0-ba" + std::to_string(b) + "-rank0";
    ASSERT_TRUE(files.count("mlrun/checkpoints/" + name)) << run["artifacts"].dump();
    EXPECT_EQ(files["mlrun/checkpoints/" + name]["size"], fs::file_size(dir / "ckpt" / (name + ".pt"))) << name;
  }
  ASSERT_TRUE(files.count("Generations.json")) << run["artifacts"].dump();
  EXPECT_EQ(testing::read_text((dir / "download" / "Generations.json").string()),
            R"({"columns":["prompt","tokens"],"data":[["Call me",2],["Ishmael",1]]})");
  int pngs = 0;
  for (const auto& [path, a] : files)
    pngs += path.rfind("images/Samples_", 0) == 0 && path.find("+step+1+") != std::string::npos;
  EXPECT_EQ(pngs, 2) << run["artifacts"].dump();
  fs::remove_all(dir);
}

TEST(MLFlowLoggerTest, BadTrackingUrisAreClearErrors) {
  try {
    MLFlowLogger logger(MLFlowLoggerOptions().tracking_uri("file:./mlruns"));
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "MLFlowLogger.tracking_uri 'file:./mlruns': expected http(s)://host:port of an MLflow tracking server "
                 "(`mlflow server`); local file stores are not supported");
  }
  ::unsetenv("MLFLOW_TRACKING_URI");
  EXPECT_THROW(MLFlowLogger{MLFlowLoggerOptions()}, std::invalid_argument);
  EXPECT_THROW(MLFlowLogger(MLFlowLoggerOptions().tracking_uri("http://x").flush_interval(-1)), std::invalid_argument);

  // Nobody listens: the trainer's INIT fails, naming the URL.
  const std::string url = "http://127.0.0.1:" + std::to_string(testing::unused_port());
  auto mlflow = std::make_shared<MLFlowLogger>(MLFlowLoggerOptions().tracking_uri(url));
  try {
    Trainer trainer(testing::quiet_options(testing::make_classifier())
                        .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                        .max_duration("1ba")
                        .loggers({mlflow}));
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(
        std::string(e.what()).find("MLFlowLogger: cannot reach " + url + "/api/2.0/mlflow/experiments/get-by-name"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace composer
