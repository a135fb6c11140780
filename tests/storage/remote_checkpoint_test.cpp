// Checkpoints and logs in a real S3 server (moto on loopback): save_folder s3://..., retention, the latest pointer,
// autoresume (also after SIGKILL, bitwise against an uninterrupted run), load_path s3://..., a damaged newest object,
// the server restarted in the middle of a run, and RemoteUploaderDownloader with FileLogger.
#include "support/moto_server.h"
#include "support/run_files.h"
#include "support/test_support.h"

#include "composer/composer.h"
#include "composer/loggers/remote_uploader_downloader.h"

#include <torch/serialize.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace composer {
namespace {

namespace fs = std::filesystem;

TrainerOptions run(const std::string& save_folder, const std::string& duration) {
  return testing::quiet_options(testing::make_classifier())
      .train_dataloader(testing::make_loader(testing::make_blobs(64), 8, true))
      .max_duration(duration)
      .run_name("s3run")
      .save_folder(save_folder)
      .save_interval("1ba")
      .save_num_checkpoints_to_keep(2);
}

std::map<std::string, at::Tensor> weights(Trainer& t) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : t.state().model->named_parameters()) out[p.key()] = p.value().detach().clone();
  return out;
}

class FirstBatch : public Callback {
 public:
  void fit_start(State& s, Logger&) override { batch = s.timestamp.batch; }
  int64_t batch = -1;
};

TEST(RemoteCheckpointTest, SavesToS3KeepsTwoAutoresumesAndLoadsFromAUri) {
  COMPOSER_REQUIRE_PYTHON("moto boto3");
  const fs::path dir = testing::fresh_dir("s3_checkpoints");
  testing::MotoServer server(dir / "server", {"ckpt"});
  const std::string folder = "s3://ckpt/{run_name}/checkpoints";
  {
    Trainer t(run(folder, "5ba"));
    t.fit();
  }
  // Retention ran remotely (the newest two), and the pointer names the newest, after it was complete.
  EXPECT_EQ(server.list("ckpt", "s3run/checkpoints/"),
            (std::vector<std::string>{"s3run/checkpoints/ep0-ba4-rank0.pt", "s3run/checkpoints/ep0-ba5-rank0.pt",
                                      "s3run/checkpoints/latest-rank0.pt.symlink"}));
  EXPECT_EQ(server.boto("get", {"ckpt", "s3run/checkpoints/latest-rank0.pt.symlink"}).output,
            "s3run/checkpoints/ep0-ba5-rank0.pt");
  // Composer's own get_file follows our pointer to the newest checkpoint and torch.load reads it.
  const auto peer =
      server.boto("composer_get", {"ckpt", "s3run/checkpoints/latest-rank0.pt", (dir / "peer.pt").string()});
  ASSERT_EQ(peer.status, 0) << peer.output;
  EXPECT_NE(peer.output.find("{\"batch\": 5}"), std::string::npos) << peer.output;

  // Straight through to 8 batches, for comparison (its own folder).
  Trainer straight(run("s3://ckpt/straight", "8ba"));
  straight.fit();

  // A damaged object newer than the others (written by boto3): autoresume skips it and resumes from batch 5.
  std::ofstream(dir / "junk.pt") << "not a checkpoint";
  ASSERT_EQ(server.boto("put", {"ckpt", "s3run/checkpoints/ep0-ba7-rank0.pt", (dir / "junk.pt").string()}).status, 0);
  auto first = std::make_shared<FirstBatch>();
  Trainer resumed(run(folder, "8ba").autoresume(true).save_overwrite(true).callbacks({first}));
  resumed.fit();
  EXPECT_EQ(first->batch, 5);
  const auto a = weights(straight), b = weights(resumed);
  for (const auto& [name, w] : a) EXPECT_TRUE(torch::equal(w, b.at(name))) << name;

  // load_path from a URI (the newest, as the pointer names it): the weights of batch 8.
  const std::string newest = server.boto("get", {"ckpt", "s3run/checkpoints/latest-rank0.pt.symlink"}).output;
  EXPECT_NE(newest.find("-ba8-rank0.pt"), std::string::npos) << newest;
  Trainer loaded(testing::quiet_options(testing::make_classifier())
                     .train_dataloader(testing::make_loader(testing::make_blobs(64), 8, true))
                     .max_duration("8ba")
                     .load_path("s3://ckpt/" + newest));
  EXPECT_EQ(loaded.state().timestamp.batch, 8);
  const auto c = weights(loaded);
  for (const auto& [name, w] : a) EXPECT_TRUE(torch::equal(w, c.at(name))) << name;

  // A missing object and a missing bucket are clear errors naming them.
  auto load = [&](const std::string& uri) {
    try {
      Trainer t(testing::quiet_options(testing::make_classifier())
                    .train_dataloader(testing::make_loader(testing::make_blobs(64), 8, true))
                    .max_duration("1ba")
                    .load_path(uri));
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string missing = load("s3://ckpt/s3run/checkpoints/ep9-ba99-rank0.pt");
  EXPECT_NE(missing.find("s3://ckpt/s3run/checkpoints/ep9-ba99-rank0.pt"), std::string::npos) << missing;
  EXPECT_NE(missing.find("no such object"), std::string::npos) << missing;
  const std::string no_bucket = load("s3://nobucket/x.pt");
  EXPECT_NE(no_bucket.find("bucket 'nobucket' does not exist"), std::string::npos) << no_bucket;
  // Starting next to later checkpoints without autoresume or overwrite is refused, naming one of them.
  const std::string later = [&] {
    try {
      Trainer t(run(folder, "2ba"));
      t.fit();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  }();
  EXPECT_NE(later.find("s3://ckpt/s3run/checkpoints/ep"), std::string::npos) << later;
  EXPECT_NE(later.find("later in training"), std::string::npos) << later;
}

TEST(RemoteCheckpointTest, SigkillThenAutoresumeFromS3IsBitwiseIdentical) {
  COMPOSER_REQUIRE_PYTHON("moto boto3");
  const fs::path dir = testing::fresh_dir("s3_sigkill");
  testing::MotoServer server(dir / "server", {"ckpt"});
  constexpr int kBatches = 12;
  auto worker = [&](const std::string& folder, const std::string& log, const std::string& weights) {
    return std::vector<std::string>{RESUME_WORKER, folder, (dir / log).string(), std::to_string(kBatches),
                                    (dir / weights).string()};
  };
  {
    testing::ChildProcess p(worker((dir / "ref").string(), "ref.jsonl", "ref.pt"));
    std::string line;
    while (p.read_line(line)) {
    }
    ASSERT_EQ(p.wait(), 0);
  }
  // Synchronous saves, then save_async (each checkpoint written and uploaded by a background thread): killed while
  // the uploads may be in flight, both resume to the uninterrupted run's weights.
  testing::ScopedEnv env;
  for (const std::string run : {"resume", "resume-async"}) {
    env.set("RESUME_WORKER_SAVE_ASYNC", run == "resume-async" ? "1" : "");
    int attempt = 0;
    for (int64_t kill_at : {3, 7}) {
      testing::ChildProcess p(worker("s3://ckpt/" + run, run + std::to_string(attempt++) + ".jsonl", run + ".pt"));
      std::string line;
      while (p.read_line(line))
        if (line == "batch " + std::to_string(kill_at)) break;
      ASSERT_EQ(line, "batch " + std::to_string(kill_at)) << run;
      p.kill_now();  // uploads of the newest checkpoint may be in flight
      EXPECT_EQ(p.wait(), 128 + SIGKILL);
      // Whatever the bucket holds, its pointer names a complete object.
      const auto keys = server.list("ckpt", run + "/");
      if (std::find(keys.begin(), keys.end(), run + "/latest-rank0.pt.symlink") != keys.end()) {
        const std::string target = server.boto("get", {"ckpt", run + "/latest-rank0.pt.symlink"}).output;
        EXPECT_NE(std::find(keys.begin(), keys.end(), target), keys.end()) << target;
      }
    }
    testing::ChildProcess p(worker("s3://ckpt/" + run, run + std::to_string(attempt++) + ".jsonl", run + ".pt"));
    std::string line, out;
    while (p.read_line(line)) out += line + "\n";
    ASSERT_EQ(p.wait(), 0) << out;
    EXPECT_NE(out.find("DONE"), std::string::npos);
    const auto a = testing::read_pickled_tensors(dir / "ref.pt"),
               b = testing::read_pickled_tensors(dir / (run + ".pt"));
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, t] : a) EXPECT_TRUE(torch::equal(t, b.at(name))) << name << " (" << run << ")";
    const auto keys = server.list("ckpt", run + "/");
    EXPECT_NE(std::find(keys.begin(), keys.end(), run + "/ep0-ba12-rank0.pt"), keys.end()) << run;
    EXPECT_EQ(server.boto("get", {"ckpt", run + "/latest-rank0.pt.symlink"}).output, run + "/ep0-ba12-rank0.pt");
  }
}

/// Restarts the S3 server (empty: no buckets) after batch 2's checkpoint went up.
class RestartServer : public Callback {
 public:
  explicit RestartServer(testing::MotoServer& s) : server_(s) {}
  void batch_end(State& s, Logger&) override {
    if (s.timestamp.batch == 2 && !done_) {
      done_ = true;
      server_.restart_empty();
    }
  }

 private:
  testing::MotoServer& server_;
  bool done_ = false;
};

TEST(RemoteCheckpointTest, ServerRestartedMidRunStopsTheRunWithAClearMessage) {
  COMPOSER_REQUIRE_PYTHON("moto boto3");
  const fs::path dir = testing::fresh_dir("s3_restart");
  testing::MotoServer server(dir / "server", {"ckpt"});
  std::string error;
  {
    auto opts = run("s3://ckpt/restart", "20ba").callbacks({std::make_shared<RestartServer>(server)});
    Trainer t(opts);
    try {
      t.fit();
    } catch (const ObjectStoreError& e) {
      error = e.what();
    }
  }
  // The new server has no bucket: the next upload fails, and the run stopped saying so.
  EXPECT_NE(error.find("s3://ckpt/restart/"), std::string::npos) << error;
  EXPECT_NE(error.find("bucket 'ckpt' does not exist"), std::string::npos) << error;
  // Nothing was written to the new server: no pointer without its checkpoint (the bucket itself is gone).
  EXPECT_NE(server.boto("list", {"ckpt", "restart/"}).output.find("NoSuchBucket"), std::string::npos);
}

TEST(RemoteUploaderDownloaderTest, UploadsLogsAndCheckpointsAndRefusesAMissingBucket) {
  COMPOSER_REQUIRE_PYTHON("moto boto3");
  const fs::path dir = testing::fresh_dir("s3_rud");
  testing::MotoServer server(dir / "server", {"logs"});
  auto rud = std::make_shared<RemoteUploaderDownloader>(RemoteUploaderDownloaderOptions()
                                                            .bucket_uri("s3://logs")
                                                            .file_path_format_string("{run_name}/{remote_file_name}"));
  const std::string log = (dir / "log-rank0.jsonl").string();
  {
    Trainer t(run((dir / "local-ckpt").string(), "3ba")
                  .save_remote_file_name("checkpoints/ba{batch}.pt")
                  .loggers({rud, std::make_shared<FileLogger>(
                                     FileLoggerOptions().filename(log).remote_file_name("logs/rank{rank}.jsonl"))}));
    t.fit();
    t.close();
  }
  const auto keys = server.list("logs", "s3run/");
  for (const char* k : {"s3run/.credentials_validated_successfully", "s3run/logs/rank0.jsonl",
                        "s3run/checkpoints/ba1.pt", "s3run/checkpoints/ba3.pt"})
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
  EXPECT_EQ(server.boto("get", {"logs", "s3run/logs/rank0.jsonl"}).output, testing::read_text(log));
  rud->download_file("checkpoints/ba3.pt", (dir / "ba3.pt").string());
  EXPECT_EQ(testing::read_text((dir / "ba3.pt").string()),
            testing::read_text((dir / "local-ckpt" / "ep0-ba3-rank0.pt").string()));

  auto wrong = std::make_shared<RemoteUploaderDownloader>(RemoteUploaderDownloaderOptions().bucket_uri("s3://nologs"));
  try {
    Trainer t(run((dir / "ckpt2").string(), "1ba").loggers({wrong}));
    t.fit();
    ADD_FAILURE() << "a missing bucket was accepted";
  } catch (const ObjectStoreError& e) {
    EXPECT_NE(std::string(e.what()).find("bucket 'nologs' does not exist"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace composer
