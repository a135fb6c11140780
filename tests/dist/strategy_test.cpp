// What a strategy answers for the Trainer and the checkpoint code (dist::Strategy's layout questions), so that
// nothing outside dist/ names a concrete strategy: the replicated defaults, FSDP's answers from its options, the
// strategy a ParallelismConfig makes, and a one-process FSDP run's state read and written through dist::ShardedState.
#include "composer/composer.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>

namespace composer {
namespace {

namespace fs = std::filesystem;

// A failed wait (a peer died) is not repeated: destructors that wait for what is in flight while that error unwinds
// must not meet it again (issue 41 item 9, the "terminate called" of a surviving rank).
TEST(CollectiveHandle, AWaitThatThrewIsNotRepeated) {
  int calls = 0;
  dist::Handle handle([&calls] {
    ++calls;
    throw std::runtime_error("dist: all_reduce failed (a peer died)");
  });
  EXPECT_THROW(handle.wait(), std::runtime_error);
  EXPECT_NO_THROW(handle.wait());
  EXPECT_EQ(calls, 1);
}

TEST(StrategyQuestions, ReplicatedStrategiesAnswerWithTheDefaults) {
  std::vector<std::unique_ptr<dist::Strategy>> strategies;
  strategies.push_back(std::make_unique<dist::SingleProcess>());
  strategies.push_back(dist::make_strategy(dist::ParallelismConfig(), at::kFloat));
  for (const auto& strategy : strategies) {
    EXPECT_EQ(strategy->name(), "single_process");
    EXPECT_FALSE(strategy->setup_before_load());
    EXPECT_EQ(strategy->sharded_state(), nullptr);
    EXPECT_EQ(strategy->gather_full_weights(), nullptr);
    EXPECT_FALSE(strategy->sharded_checkpoint_prefix());
    EXPECT_FALSE(strategy->loads_checkpoints_on_rank0_only());
    EXPECT_FALSE(strategy->cuda_graph_obstacle());
  }
}

TEST(StrategyQuestions, FsdpAnswersFromItsOptions) {
  const auto sharded = dist::make_strategy(dist::ParallelismConfig().fsdp(dist::FSDPOptions()
                                                                              .state_dict_type("sharded")
                                                                              .sharded_ckpt_prefix_dir("s{batch}")
                                                                              .load_monolith_rank0_only(true)),
                                           at::kFloat);
  EXPECT_EQ(sharded->name(), "fsdp");
  EXPECT_TRUE(sharded->setup_before_load());
  EXPECT_EQ(sharded->sharded_state(), nullptr) << "before setup() the model and optimizer are whole";
  EXPECT_EQ(sharded->sharded_checkpoint_prefix().value_or(""), "s{batch}");
  EXPECT_FALSE(sharded->loads_checkpoints_on_rank0_only()) << "load_monolith_rank0_only applies to full ones only";
  EXPECT_NE(sharded->cuda_graph_obstacle().value_or("").find("parallelism_config.fsdp"), std::string::npos);

  const auto full = dist::make_strategy(
      dist::ParallelismConfig().fsdp(dist::FSDPOptions().load_monolith_rank0_only(true)), at::kFloat);
  EXPECT_FALSE(full->sharded_checkpoint_prefix());
  EXPECT_TRUE(full->loads_checkpoints_on_rank0_only());
}

TEST(StrategyQuestions, ParallelismConfigNamesItsShardedSectionAndChecksIt) {
  EXPECT_FALSE(dist::ParallelismConfig().sharded_section());
  EXPECT_EQ(dist::ParallelismConfig().fsdp(dist::FSDPOptions()).sharded_section().value_or(""),
            "parallelism_config.fsdp");
  const auto error_of = [](const dist::FSDPOptions& fsdp) {
    try {
      dist::ParallelismConfig().fsdp(fsdp).validate();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(dist::FSDPOptions().state_dict_type("local")),
            "parallelism_config.fsdp.state_dict_type must be 'full' or 'sharded', got 'local'");
  EXPECT_NE(error_of(dist::FSDPOptions().activation_cpu_offload(true)).find("needs activation_checkpointing: true"),
            std::string::npos);
  EXPECT_EQ(error_of(dist::FSDPOptions()), "no error");
}

// A one-process FSDP run (NO_SHARD: a shard group of one) holds its state through ShardedState once the Trainer has
// set it up, and its checkpoint, written through that interface, loads into a plain run with the same weights.
TEST(StrategyQuestions, TheCodecReadsAndWritesAShardedRunThroughTheInterface) {
  const fs::path dir = fs::temp_directory_path() / ("composer_strategy_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto make = [](uint64_t seed) {
    torch::manual_seed(static_cast<int64_t>(seed));
    return ComposerClassifier::wrap(
        torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::ReLU(), torch::nn::Linear(8, 3)));
  };
  auto loader =
      std::make_shared<DatasetLoader>(std::make_shared<TensorDataset>(Batch(at::randn({32, 4}), at::randint(3, {32}))),
                                      DatasetLoaderOptions(8).num_workers(0));
  auto model = make(0);
  Trainer sharded(TrainerOptions(model)
                      .train_dataloader(loader)
                      .max_duration("4ba")
                      .device("cpu")
                      .progress_bar(false)
                      .save_folder(dir.string())
                      .save_interval("4ba")
                      .parallelism_config(dist::ParallelismConfig().fsdp(dist::FSDPOptions())));
  ASSERT_NE(sharded.state().strategy->sharded_state(), nullptr);
  sharded.fit();
  std::vector<std::pair<std::string, at::Tensor>> trained;
  {
    const auto gathered = sharded.state().strategy->gather_full_weights();
    for (const auto& p : model->named_parameters()) trained.emplace_back(p.key(), p.value().detach().clone());
  }
  const std::string ckpt = (dir / "ep0-ba4-rank0.pt").string();
  ASSERT_TRUE(fs::exists(ckpt));
  auto plain_model = make(1);
  Trainer plain(TrainerOptions(plain_model).device("cpu").progress_bar(false).load_path(ckpt));
  EXPECT_EQ(plain.state().strategy->sharded_state(), nullptr);
  const auto loaded = plain_model->named_parameters();
  for (const auto& [name, value] : trained) EXPECT_TRUE(loaded[name].equal(value)) << name;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace composer
