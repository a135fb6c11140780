#include "support/data_paths.h"
#include "support/python.h"
#include "support/test_support.h"

#include <sys/resource.h>
#include <torch/serialize.h>

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <fstream>

namespace composer {
namespace {

namespace fs = std::filesystem;

// Flips one bit inside the bytes of `tensor` as stored in the checkpoint file `path` (tensor records are raw).
void flip_bit_in_tensor_bytes(const std::string& path, const at::Tensor& tensor) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const at::Tensor t = tensor.detach().contiguous();
  const size_t at = bytes.find(std::string(static_cast<const char*>(t.data_ptr()), std::min<size_t>(64, t.nbytes())));
  ASSERT_NE(at, std::string::npos) << "the tensor's bytes are not in " << path;
  bytes[at + t.nbytes() / 2] = static_cast<char>(bytes[at + t.nbytes() / 2] ^ 0x10);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

struct CheckpointTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_ckpt_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  // A trainer over the same data and model shape; `seed` changes the initial weights.
  static std::unique_ptr<Trainer> make(uint64_t seed, const std::string& duration) {
    auto model = testing::make_classifier(8, 16, 4, seed);
    auto opt =
        std::make_shared<optim::DecoupledSGDW>(model->parameters(), optim::DecoupledSGDWOptions(0.1).momentum(0.9));
    TrainerOptions o =
        testing::quiet_options(model)
            .run_name("ckpt")
            .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
            .optimizer(opt)
            .max_duration(duration)
            .schedulers({std::make_shared<CosineAnnealingScheduler>(CosineAnnealingSchedulerOptions().alpha_f(0.5))})
            .callbacks({std::make_shared<SpeedMonitor>(2)});
    return std::make_unique<Trainer>(o);
  }
  // An autoresuming run `name` of `batches` batches saving every 2 batches to dir/name.
  TrainerOptions autoresume_options(const std::string& name, int64_t batches) const {
    return testing::quiet_options(testing::make_classifier())
        .run_name(name)
        .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
        .max_duration(Time(batches, TimeUnit::BATCH))
        .save_folder((dir / name).string())
        .save_interval("2ba")
        .autoresume(true);
  }
  static std::vector<at::Tensor> weights(Trainer& t) {
    std::vector<at::Tensor> w;
    for (const auto& p : t.state().model->parameters()) w.push_back(p.detach().clone());
    return w;
  }
};

TEST_F(CheckpointTest, FormatVariables) {
  State s;
  s.run_name = "run";
  s.timestamp = Timestamp().to_next_batch(8, 100).to_next_batch(8, 100).to_next_epoch().to_next_batch(8, 100);
  EXPECT_EQ(format_name("{run_name}/ep{epoch}-ba{batch}-rank{rank}.pt", s), "run/ep1-ba3-rank0.pt");
  EXPECT_EQ(
      format_name(
          "{sample}-{sample_in_epoch}-{token}-{token_in_epoch}-{batch_in_epoch}-{world_size}-{node_rank}-{unknown}", s),
      "24-8-300-100-1-1-0-{unknown}");
}

TEST_F(CheckpointTest, EveryStatePartRoundTrips) {
  auto a = make(1, "5ba");
  a->fit();
  const std::string path = (dir / "a.pt").string();
  save_checkpoint(a->state(), path);
  const at::Tensor rng_after_save = at::detail::getDefaultCPUGenerator().get_state();

  auto b = make(2, "9ba");
  auto rng = apply_checkpoint(b->state(), read_checkpoint(path), {}, path);
  ASSERT_TRUE(rng.has_value());
  const State& sa = a->state();
  const State& sb = b->state();
  EXPECT_EQ(sb.timestamp, sa.timestamp);
  EXPECT_EQ(sb.rank_zero_seed, sa.rank_zero_seed);
  EXPECT_EQ(sb.run_name, "ckpt");
  const auto wa = weights(*a), wb = weights(*b);
  for (size_t i = 0; i < wa.size(); ++i) EXPECT_TRUE(torch::equal(wa[i], wb[i]));
  EXPECT_TRUE(torch::equal(sb.train_metrics.at("Accuracy")->state(), sa.train_metrics.at("Accuracy")->state()));
  // Optimizer state: both continue identically from here.
  torch::manual_seed(0);
  restore_rng(*rng);
  EXPECT_TRUE(torch::equal(at::detail::getDefaultCPUGenerator().get_state(), rng_after_save));
  a->fit(Time(3, TimeUnit::BATCH));
  b->fit(Time(3, TimeUnit::BATCH));
  const auto wa2 = weights(*a), wb2 = weights(*b);
  for (size_t i = 0; i < wa2.size(); ++i) EXPECT_TRUE(torch::equal(wa2[i], wb2[i]));
  // Metadata travels with the state.
  const auto meta = read_checkpoint(path).toGenericDict().at("state").toGenericDict().at("metadata").toGenericDict();
  EXPECT_EQ(meta.at("precision").toStringRef(), "fp32");
  EXPECT_EQ(meta.at("train_batch_size").toInt(), 8);
  ASSERT_EQ(meta.at("schedulers").toList().size(), 1u);  // the schedule, as its field list writes it
  EXPECT_EQ(meta.at("schedulers").toList().get(0).toStringRef(), sa.schedulers.at(0)->repr());
  EXPECT_EQ(sa.schedulers.at(0)->repr().rfind("CosineAnnealingScheduler(t_max=", 0), 0u);
}

TEST_F(CheckpointTest, WeightsOnlyAndIgnoreKeys) {
  auto a = make(1, "4ba");
  a->fit();
  const std::string full = (dir / "full.pt").string(), slim = (dir / "slim.pt").string();
  save_checkpoint(a->state(), full);
  save_checkpoint(a->state(), slim, /*weights_only=*/true);
  EXPECT_LT(fs::file_size(slim), fs::file_size(full));
  auto b = make(2, "4ba");
  CheckpointLoadOptions wo;
  wo.weights_only = true;
  EXPECT_FALSE(apply_checkpoint(b->state(), read_checkpoint(full), wo, full).has_value());
  EXPECT_EQ(b->state().timestamp.batch, 0);  // only the weights
  EXPECT_TRUE(torch::equal(weights(*a)[0], weights(*b)[0]));

  auto c = make(2, "4ba");
  const auto before = weights(*c);
  CheckpointLoadOptions ignore;
  ignore.ignore_keys = {"state/model/module.2.*", "state/optimizers"};
  ignore.strict_model = false;
  apply_checkpoint(c->state(), read_checkpoint(full), ignore, full);
  EXPECT_TRUE(torch::equal(weights(*c)[0], weights(*a)[0]));  // module.0 loaded
  EXPECT_TRUE(torch::equal(weights(*c)[2], before[2]));       // module.2 skipped
  ignore.strict_model = true;
  auto d = make(2, "4ba");
  EXPECT_THROW(apply_checkpoint(d->state(), read_checkpoint(full), ignore, full), CheckpointError);
}

TEST_F(CheckpointTest, CorruptTruncatedAndForeignFilesNameTheFile) {
  auto a = make(1, "2ba");
  a->fit();
  const std::string good = (dir / "good.pt").string();
  save_checkpoint(a->state(), good);
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& name, const std::string& content) {
    const std::string p = (dir / name).string();
    std::ofstream(p, std::ios::binary) << content;
    return p;
  };
  const std::vector<std::pair<std::string, std::string>> cases{
      {write("truncated.pt", bytes.substr(0, bytes.size() / 2)), "corrupt or truncated"},
      {write("garbage.pt", "this is not a checkpoint"), "corrupt or truncated"},
      {write("empty.pt", ""), "is empty"},
      {(dir / "missing.pt").string(), "cannot be opened"},
  };
  for (const auto& [path, needle] : cases) {
    try {
      read_checkpoint(path);
      FAIL() << path;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
  Dict foreign = new_dict();
  foreign.insert("weights", at::ones({2}));
  const std::string f = (dir / "foreign.pt").string();
  write_file_atomically(f, torch::pickle_save(foreign));
  EXPECT_THROW(read_checkpoint(f), CheckpointError);
  // An incompatible model names the file and the key.
  auto other =
      std::make_unique<Trainer>(testing::quiet_options(testing::make_classifier(8, 32, 4)).max_duration("1ba"));
  try {
    apply_checkpoint(other->state(), read_checkpoint(good), {}, good);
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(good), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("module.0.weight"), std::string::npos) << e.what();
  }
}

// One flipped bit in the tensor bytes: LibTorch's reader loads such a file without a word (its zip reader skips the
// CRC-32s); ours names the file and the damaged record, and autoresume sets it aside for the previous checkpoint.
TEST_F(CheckpointTest, DamagedTensorBytesAreAnErrorNotWrongWeights) {
  auto a = std::make_unique<Trainer>(testing::quiet_options(testing::make_classifier(8, 512, 4)).max_duration("1ba"));
  const std::string good = (dir / "good.pt").string();
  save_checkpoint(a->state(), good);
  const std::string damaged = (dir / "damaged.pt").string();
  fs::copy_file(good, damaged);
  flip_bit_in_tensor_bytes(damaged, a->state().model->parameters()[0]);
  std::ifstream in(damaged, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NO_THROW(torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())));  // LibTorch: silently wrong
  try {
    read_checkpoint(damaged);
    FAIL() << "the damaged checkpoint was read";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(damaged), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fails its CRC-32 check"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("data/"), std::string::npos) << e.what();  // names the record
  }
  EXPECT_NO_THROW(read_checkpoint(good));
}

// save_async writes the same files as a synchronous save (the state copied at the save point, however training
// goes on), keeps the same retention and link, and an error of the background write stops the run at the next save
// or at FIT_END naming the file.
TEST_F(CheckpointTest, AsyncSavesWriteWhatSynchronousSavesWrite) {
  for (const bool async : {false, true}) {
    Trainer t(autoresume_options(async ? "async" : "sync", 7).save_async(async).save_num_checkpoints_to_keep(2));
    t.fit();
    t.close();
  }
  for (const char* name : {"ep0-ba4-rank0.pt", "ep0-ba6-rank0.pt", "ep0-ba7-rank0.pt"}) {
    const bool kept = std::string(name) != "ep0-ba4-rank0.pt";
    ASSERT_EQ(fs::exists(dir / "async" / name), kept) << name;
    if (!kept) continue;
    const auto a = read_checkpoint((dir / "sync" / name).string()).toGenericDict().at("state").toGenericDict();
    const auto b = read_checkpoint((dir / "async" / name).string()).toGenericDict().at("state").toGenericDict();
    for (const auto& e : a.at("model").toGenericDict())
      EXPECT_TRUE(at::equal(e.value().toTensor(), b.at("model").toGenericDict().at(e.key()).toTensor())) << name;
  }
  EXPECT_EQ(fs::read_symlink(dir / "async" / "latest-rank0.pt"), "ep0-ba7-rank0.pt");

  fs::create_directories(dir / "broken" / "ep0-ba2-rank0.pt" / "in-the-way");  // the rename onto it fails
  Trainer broken(autoresume_options("broken", 4).save_async(true).save_overwrite(true).autoresume(false));
  try {
    broken.fit();
    FAIL() << "the failed background write went unnoticed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("CheckpointSaver: writing '" + (dir / "broken" / "ep0-ba2-rank0.pt").string() +
                                         "' in the background failed"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CheckpointTest, AutoresumeSetsADamagedCheckpointAside) {
  auto opts = [&](int64_t batches) { return autoresume_options("damaged", batches); };
  at::Tensor last_weight;
  {
    Trainer t(opts(4));
    t.fit();
    last_weight = t.state().model->parameters()[0].detach().clone();
  }
  flip_bit_in_tensor_bytes((dir / "damaged" / "ep0-ba4-rank0.pt").string(), last_weight);
  Trainer resumed(opts(6));
  EXPECT_EQ(resumed.state().timestamp.batch, 2);
  EXPECT_TRUE(fs::exists(dir / "damaged" / "ep0-ba4-rank0.pt.corrupt"));
}

// A full disk (a file-size limit makes write() fail with EFBIG) leaves the previous checkpoint intact and no
// temporary file behind.
TEST_F(CheckpointTest, FailedWriteKeepsThePreviousCheckpoint) {
  auto a = make(1, "2ba");
  a->fit();
  const std::string path = (dir / "ck.pt").string();
  save_checkpoint(a->state(), path);
  const auto size = fs::file_size(path);
  a->fit(Time(2, TimeUnit::BATCH));
  rlimit old{};
  ::getrlimit(RLIMIT_FSIZE, &old);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string error;
  try {
    save_checkpoint(a->state(), path);
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(error.find("cannot write"), std::string::npos) << error;
  EXPECT_NE(error.find("ck.pt"), std::string::npos) << error;
  EXPECT_EQ(fs::file_size(path), size);
  EXPECT_EQ(read_checkpoint(path)
                .toGenericDict()
                .at("state")
                .toGenericDict()
                .at("timestamp")
                .toGenericDict()
                .at("Timestamp")
                .toGenericDict()
                .at("batch")
                .toInt(),
            2);
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos);
}

// A save killed mid-write leaves its temporary files (".<name>.tmp-<pid>"), beside single-file checkpoints and inside
// a sharded checkpoint's folder; the next run's start removes both, and nothing else.
TEST_F(CheckpointTest, TemporariesOfKilledSavesAreRemovedAtTheNextStart) {
  fs::create_directories(dir / "ep0-ba6");
  for (const fs::path& p : {dir / ".ep0-ba3-rank0.pt.tmp-4242", dir / "ep0-ba6" / ".__1_0.distcp.tmp-4242",
                            dir / "ep0-ba6" / "__0_0.distcp", dir / "notes.txt"})
    std::ofstream(p) << "x";
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                      .max_duration("1ba")
                      .save_folder(dir.string())
                      .save_overwrite(true));
  trainer.fit();
  EXPECT_FALSE(fs::exists(dir / ".ep0-ba3-rank0.pt.tmp-4242"));
  EXPECT_FALSE(fs::exists(dir / "ep0-ba6" / ".__1_0.distcp.tmp-4242"));
  EXPECT_TRUE(fs::exists(dir / "ep0-ba6" / "__0_0.distcp"));
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));
}

TEST_F(CheckpointTest, SaverIntervalLatestLinkAndRetention) {
  const std::string folder = (dir / "{run_name}").string();
  auto model = testing::make_classifier();
  Trainer trainer(testing::quiet_options(model)
                      .run_name("keep")
                      .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
                      .max_duration("7ba")
                      .save_folder(folder)
                      .save_interval("2ba")
                      .save_num_checkpoints_to_keep(2));
  trainer.fit();
  const fs::path run = dir / "keep";
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(run)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  // Saved at 2, 4, 6 and the final 7; the newest two are kept.
  EXPECT_EQ(names, (std::vector<std::string>{"ep0-ba6-rank0.pt", "ep0-ba7-rank0.pt", "latest-rank0.pt"}));
  EXPECT_EQ(fs::read_symlink(run / "latest-rank0.pt").string(), "ep0-ba7-rank0.pt");

  // A new run without overwrite refuses a folder holding checkpoints from later in training.
  Trainer again(testing::quiet_options(testing::make_classifier())
                    .run_name("keep")
                    .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
                    .max_duration("3ba")
                    .save_folder(folder));
  try {
    again.fit();
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ep0-ba7-rank0.pt"), std::string::npos) << e.what();
  }
  EXPECT_THROW(CheckpointSaver(CheckpointSaverOptions().num_checkpoints_to_keep(0)), std::invalid_argument);
}

// Counts the checkpoint files in the saver's local folder at each batch end (after the previous batch's save).
class LocalCopies : public Callback {
 public:
  explicit LocalCopies(std::shared_ptr<CheckpointSaver> saver) : saver_(std::move(saver)) {}
  void batch_end(State& state, Logger&) override {
    std::error_code ec;
    for (const auto& e : std::filesystem::recursive_directory_iterator(saver_->folder(state), ec))
      if (e.path().extension() == ".pt" || e.is_symlink()) ++most;
  }
  int64_t most = 0;

 private:
  std::shared_ptr<CheckpointSaver> saver_;
};

// save_num_checkpoints_to_keep 0 with an object-store folder, as in Composer: no local copy stays, the store keeps
// every checkpoint, and a run resumes from it.
TEST_F(CheckpointTest, KeepZeroWithAnObjectStoreKeepsOnlyTheRemoteCopies) {
  const std::string remote = "file://" + (dir / "bucket").string() + "/{run_name}";
  auto saver = std::make_shared<CheckpointSaver>(
      CheckpointSaverOptions().folder(remote).save_interval(Time::from_batch(1)).num_checkpoints_to_keep(0));
  auto copies = std::make_shared<LocalCopies>(saver);
  {
    Trainer t(testing::quiet_options(testing::make_classifier())
                  .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
                  .max_duration("3ba")
                  .run_name("keep0")
                  .callbacks(std::vector<std::shared_ptr<Callback>>{saver, copies}));
    t.fit();
    EXPECT_TRUE(saver->saved_checkpoints().empty());
    t.close();
  }
  EXPECT_EQ(copies->most, 0);
  int64_t uploaded = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "bucket" / "keep0"))
    if (e.path().extension() == ".pt") ++uploaded;
  EXPECT_EQ(uploaded, 3);
  Trainer resumed(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
                      .max_duration("4ba")
                      .run_name("keep0")
                      .load_path(remote + "/ep0-ba3-rank{rank}.pt"));
  EXPECT_EQ(resumed.state().timestamp.batch, 3);
  EXPECT_THROW(CheckpointSaver(CheckpointSaverOptions().folder((dir / "local").string()).num_checkpoints_to_keep(0)),
               std::invalid_argument);
}

TEST_F(CheckpointTest, AutoresumeFallsBackPastACorruptCheckpoint) {
  auto opts = [&](int64_t batches) { return autoresume_options("auto", batches); };
  {
    Trainer t(opts(4));
    t.fit();
  }
  std::ofstream(dir / "auto" / "ep0-ba4-rank0.pt", std::ios::trunc) << "garbage";  // the newest is corrupt
  Trainer resumed(opts(6));
  EXPECT_EQ(resumed.state().timestamp.batch, 2);                       // fell back to batch 2
  EXPECT_TRUE(fs::exists(dir / "auto" / "ep0-ba4-rank0.pt.corrupt"));  // set aside, not deleted
  resumed.fit();
  EXPECT_EQ(resumed.state().timestamp.batch, 6);
  EXPECT_THROW(Trainer(testing::quiet_options(testing::make_classifier()).autoresume(true)), std::invalid_argument);
}

// Python's torch.load, with torch >= 2.6's default weights_only=True, returns a plain dict whose model entry an
// equivalent PyTorch module loads strictly; safetensors.torch.load_file reads our export with the same values.
TEST_F(CheckpointTest, PythonTorchLoadsTheCheckpointWeightsOnly) {
  COMPOSER_REQUIRE_PYTHON("torch safetensors");
  auto net = models::mnist_cnn(1, 10, 4);
  auto model = ComposerClassifier::wrap(net);
  auto adam = std::make_shared<optim::DecoupledAdamW>(model->parameters());
  Trainer t(testing::quiet_options(model)
                .train_dataloader(std::make_shared<TensorDataLoader>(
                    Batch(at::randn({16, 1, 28, 28}), at::randint(10, {16}, at::TensorOptions().dtype(at::kLong))),
                    TensorDataLoaderOptions(8)))
                .optimizer(adam)
                .max_duration("2ba"));
  t.fit();
  const std::string path = (dir / "py.pt").string();
  save_checkpoint(t.state(), path);
  NamedTensors weights;
  for (const auto& p : model->named_parameters()) weights.emplace_back(p.key(), p.value());
  const std::string st_path = (dir / "py.safetensors").string();
  write_safetensors(st_path, weights, {{"format", "pt"}});
  const std::string script = (dir / "check.py").string();
  std::ofstream(script) << R"(import sys, torch, torch.nn as nn
from safetensors.torch import load_file
ck = torch.load(sys.argv[1], weights_only=True)
assert type(ck) is dict and type(ck["state"]) is dict, type(ck)
w = 4
class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.module = nn.Sequential(nn.Conv2d(1, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(w, 2 * w, 3, padding=1, bias=False), nn.BatchNorm2d(2 * w), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(2 * w * 49, 10))
m = Classifier()
m.load_state_dict(ck["state"]["model"], strict=True)
ts = ck["state"]["timestamp"]["Timestamp"]
assert ts["batch"] == 2, ts
opt = ck["state"]["optimizers"]["DecoupledAdamW"]
first = opt["param_groups"][0]["params"][0]  # keyed by parameter name, as Composer's get_optimizer_state_dict
assert first == "module.0.weight" and set(opt["state"]) <= set(dict(m.named_parameters())), opt["param_groups"]
assert opt["state"][first]["step"].item() == 2 and opt["param_groups"][0]["betas"] == (0.9, 0.95), opt["param_groups"]
st = load_file(sys.argv[2])
params = dict(m.named_parameters())
assert set(st) == set(params), (sorted(st), sorted(params))
for k, v in st.items():
    assert torch.equal(v, params[k].detach()), k
print("python-ok", sum(p.numel() for p in m.parameters()), len(st))
)";
  const auto py = testing::run_python({script, path, st_path});
  ASSERT_EQ(py.status, 0) << py.output;
  int64_t params = 0;
  for (const auto& p : net->parameters()) params += p.numel();
  EXPECT_NE(py.output.find("python-ok " + std::to_string(params) + " " + std::to_string(weights.size())),
            std::string::npos)
      << py.output;
}

// composer-cpp inspect's view of a checkpoint: the codec's keys read back, and a clear error for a dict that is not a
// State's.
TEST(StateSummaryTest, ReadsTheCodecsKeysAndRefusesAnotherDict) {
  auto model = ComposerClassifier::wrap(torch::nn::Sequential(torch::nn::Linear(4, 3)));
  auto loader =
      std::make_shared<DatasetLoader>(std::make_shared<TensorDataset>(Batch(at::randn({8, 4}), at::randint(3, {8}))),
                                      DatasetLoaderOptions(4).num_workers(0));
  Trainer trainer(TrainerOptions(model)
                      .train_dataloader(loader)
                      .max_duration("2ba")
                      .device("cpu")
                      .progress_bar(false)
                      .run_name("summary-run")
                      .algorithms({std::make_shared<algorithms::LabelSmoothing>()}));
  trainer.fit();
  const StateSummary s = summarize_state(state_dict(trainer.state()));
  EXPECT_EQ(s.run_name.value_or(""), "summary-run");
  ASSERT_TRUE(s.algorithms.has_value());
  ASSERT_EQ(s.algorithms->size(), 1u);
  EXPECT_EQ(s.algorithms->front().rfind("LabelSmoothing(", 0), 0u) << s.algorithms->front();
  EXPECT_EQ(s.optimizers.value_or(std::vector<std::string>{}), std::vector<std::string>{"DecoupledSGDW"});
  bool batch_two = false;
  for (const auto& [key, value] : s.timestamp) batch_two = batch_two || (key == "batch" && value.toInt() == 2);
  EXPECT_TRUE(batch_two);
  ASSERT_EQ(s.model.size(), 2u);
  EXPECT_EQ(s.model_elements(), 4 * 3 + 3);
  EXPECT_EQ(s.model.front().dtype, at::kFloat);

  c10::impl::GenericDict other(c10::StringType::get(), c10::AnyType::get());
  other.insert("weights", at::ones({2}));
  try {
    summarize_state(other);
    FAIL() << "a dict without a model dict was summarised";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "the checkpoint's state is not a dict with a 'model' dict");
  }
}

}  // namespace
}  // namespace composer
