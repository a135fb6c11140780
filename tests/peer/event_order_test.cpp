// Composer as the peer: the same scenario run by MosaicML Composer's Trainer (tests/peer/composer_events.py, in the
// project environment) and by ours gives the same event sequence, event by event.
#include "support/python.h"
#include "support/test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace composer {
namespace {

namespace fs = std::filesystem;

// The loaders of composer_events.py: n samples of 8 features and 4 classes, in order.
std::shared_ptr<TensorDataLoader> loader(int64_t n, int64_t batch_size, uint64_t seed) {
  return testing::make_loader(testing::make_blobs(n, 8, 4, seed), batch_size, /*shuffle=*/false);
}

std::vector<std::string> cpp_events(const fs::path& save_folder) {
  auto recorder = std::make_shared<testing::RecordingCallback>();
  Evaluator every_epoch;
  every_epoch.label = "eval_epoch";
  every_epoch.dataloader = loader(6, 3, 2);
  every_epoch.eval_interval = Time::from_string("1ep");
  Evaluator every_3_batches;
  every_3_batches.label = "eval_batches";
  every_3_batches.dataloader = loader(4, 4, 3);
  every_3_batches.eval_interval = Time::from_string("3ba");
  Trainer trainer(testing::quiet_options(testing::make_classifier(8, 16, 4))
                      .train_dataloader(loader(16, 4, 1))
                      .evaluators({every_epoch, every_3_batches})
                      .max_duration("2ep")
                      .device_train_microbatch_size(2)
                      .save_folder(save_folder.string())
                      .save_interval(Time::from_string("2ba"))
                      .save_overwrite(true)
                      .callbacks({recorder, std::make_shared<testing::StopAtBatch>(6)}));
  trainer.fit();
  trainer.eval();
  auto predict_loader = loader(5, 5, 4);
  trainer.predict(*predict_loader);
  std::vector<std::string> out;
  for (Event e : recorder->events) out.emplace_back(event_value(e));
  return out;
}

TEST(PeerEventOrderTest, SameSequenceAsComposerTrainer) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  const fs::path dir = fs::temp_directory_path() / ("composer_peer_events_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string json_path = (dir / "composer_events.json").string();
  const auto py =
      testing::run_python({testing::peer_script("composer_events.py"), json_path, (dir / "py_ckpt").string()});
  ASSERT_EQ(py.status, 0) << py.output;
  const std::vector<std::string> composer_events =
      nlohmann::json::parse(testing::read_text(json_path)).get<std::vector<std::string>>();
  const std::vector<std::string> ours = cpp_events(dir / "cpp_ckpt");
  ASSERT_GT(composer_events.size(), 150u);  // the scenario really ran: 6 batches, 4 evaluations, eval(), predict()
  for (size_t i = 0; i < std::min(ours.size(), composer_events.size()); ++i) {
    ASSERT_EQ(ours[i], composer_events[i]) << "first difference at event " << i << " of " << composer_events.size();
  }
  EXPECT_EQ(ours.size(), composer_events.size());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace composer
