// nn::CheckpointedLayer and apply_activation_checkpointing: the same loss and gradients as without, on a GPT with
// dropout (the recomputation replays the random state), with the model's names unchanged.
#include "support/test_support.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#define TEST_HAS_CUDA_ALLOCATOR 1
#endif

namespace composer {
namespace {

std::shared_ptr<ComposerLanguageModel> dropout_gpt() {
  torch::manual_seed(11);
  auto model = std::make_shared<ComposerLanguageModel>(std::make_shared<models::GPT>(
      models::TransformerConfig().vocab_size(23).max_seq_len(12).n_layer(3).n_head(2).d_model(16).dropout(0.2)));
  model->to(at::kDouble);
  return model;
}

Batch token_batch() {
  auto gen = at::detail::createCPUGenerator(5);
  const at::Tensor t = at::randint(0, 23, {4, 13}, gen, at::TensorOptions().dtype(at::kLong));
  return Batch({{"input_ids", t.narrow(1, 0, 12).contiguous()}, {"labels", t.narrow(1, 1, 12).contiguous()}});
}

// One forward and backward from a fixed random state; the loss and every gradient by parameter name.
std::pair<double, std::map<std::string, at::Tensor>> step(ComposerModel& model) {
  torch::manual_seed(99);
  const Batch batch = token_batch();
  const at::Tensor loss = model.loss(model.forward(batch), batch);
  loss.backward();
  std::map<std::string, at::Tensor> grads;
  for (const auto& p : model.named_parameters()) grads[p.key()] = p.value().grad().clone();
  return {loss.item<double>(), grads};
}

TEST(ActivationCheckpointingTest, SameLossAndGradientsWithDropoutAndNamesUnchanged) {
  auto plain = dropout_gpt();
  auto checkpointed = dropout_gpt();
  std::vector<std::string> names;
  for (const auto& p : checkpointed->named_parameters()) names.push_back(p.key());
  // The blocks, and the token embedding (its input, the ids, needs no gradient).
  const auto policy = [](const std::string& name, const torch::nn::Module& m) {
    return name == "model.wte" || m.name().find("GPTBlock") != std::string::npos;
  };
  EXPECT_EQ(nn::apply_activation_checkpointing(*checkpointed, policy), 4);
  std::vector<std::string> after;
  for (const auto& p : checkpointed->named_parameters()) after.push_back(p.key());
  EXPECT_EQ(after, names);
  const auto [loss_a, grads_a] = step(*plain);
  const auto [loss_b, grads_b] = step(*checkpointed);
  EXPECT_EQ(loss_a, loss_b);
  ASSERT_EQ(grads_a.size(), grads_b.size());
  for (const auto& [name, g] : grads_a) {
    ASSERT_TRUE(grads_b.at(name).defined()) << name;
    EXPECT_TRUE(at::equal(g, grads_b.at(name))) << name << " differs by " << (g - grads_b.at(name)).abs().max();
  }
  // The random state after the step is the one without checkpointing: recomputation put it back.
  torch::manual_seed(1);
  step(*plain);
  const at::Tensor after_plain = at::detail::getDefaultCPUGenerator().get_state();
  torch::manual_seed(1);
  step(*checkpointed);
  EXPECT_TRUE(at::equal(at::detail::getDefaultCPUGenerator().get_state(), after_plain));
  // Evaluation (no gradients) runs the layers directly.
  torch::NoGradGuard no_grad;
  plain->eval();
  checkpointed->eval();
  EXPECT_TRUE(at::equal(plain->forward(token_batch()), checkpointed->forward(token_batch())));
}

// activation_cpu_offload's checkpointing: the kept input goes through the offloading path (in host memory already
// here, so it stays where it is): the same loss and gradients, dropout replayed.
TEST(ActivationCheckpointingTest, OffloadedInputsGiveTheSameLossAndGradients) {
  auto plain = dropout_gpt();
  auto offloaded = dropout_gpt();
  const auto blocks = [](const std::string&, const torch::nn::Module& m) {
    return m.name().find("GPTBlock") != std::string::npos;
  };
  EXPECT_EQ(nn::apply_activation_checkpointing(*offloaded, blocks, /*offload_input=*/true), 3);
  for (const auto& m : offloaded->modules()) {
    if (auto* c = dynamic_cast<nn::CheckpointedLayer*>(m.get())) {
      EXPECT_TRUE(c->offloads_input());
    }
  }
  const auto [loss_a, grads_a] = step(*plain);
  const auto [loss_b, grads_b] = step(*offloaded);
  EXPECT_EQ(loss_a, loss_b);
  ASSERT_EQ(grads_a.size(), grads_b.size());
  for (const auto& [name, g] : grads_a) EXPECT_TRUE(at::equal(g, grads_b.at(name))) << name;
}

// On a CUDA device the offloaded inputs leave it: after the forward of a 4-block GPT with every block checkpointed,
// the device holds less than with the inputs kept there, by at least three blocks' inputs (the first block's input
// may be held by the embedding), and the gradients agree.
TEST(ActivationCheckpointingTest, OffloadedInputsLeaveTheCudaDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device (bench/gpu_suite.sh runs it)";
#ifndef TEST_HAS_CUDA_ALLOCATOR
  FAIL() << "built without c10/cuda/CUDACachingAllocator.h";
#else
  const int64_t batch = 8, seq = 128, d_model = 256, n_layer = 4;
  const auto allocated = [] { return c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].current; };
  const c10::Device cuda(c10::kCUDA, 0);
  auto gen = at::detail::createCPUGenerator(3);
  const at::Tensor t = at::randint(0, 50, {batch, seq + 1}, gen, at::TensorOptions().dtype(at::kLong)).to(cuda);
  const Batch tokens({{"input_ids", t.narrow(1, 0, seq).contiguous()}, {"labels", t.narrow(1, 1, seq).contiguous()}});
  std::map<bool, int64_t> kept;
  std::map<bool, std::map<std::string, at::Tensor>> grads;
  for (const bool offload : {false, true}) {
    torch::manual_seed(5);
    auto model = std::make_shared<ComposerLanguageModel>(std::make_shared<models::GPT>(
        models::TransformerConfig().vocab_size(50).max_seq_len(seq).n_layer(n_layer).n_head(4).d_model(d_model)));
    model->to(cuda);
    nn::apply_activation_checkpointing(
        *model,
        [](const std::string&, const torch::nn::Module& m) { return m.name().find("GPTBlock") != std::string::npos; },
        offload);
    const int64_t before = allocated();
    at::Tensor loss = model->loss(model->forward(tokens), tokens);
    kept[offload] = allocated() - before;
    loss.backward();
    for (const auto& p : model->named_parameters()) grads[offload][p.key()] = p.value().grad().cpu();
  }
  const int64_t input_bytes = batch * seq * d_model * 4;
  EXPECT_GE(kept[false] - kept[true], (n_layer - 1) * input_bytes)
      << "kept on the device after the forward: " << kept[false] << " bytes, offloaded " << kept[true];
  for (const auto& [name, g] : grads[false])
    EXPECT_LT((g - grads[true].at(name)).abs().max().item<double>(), 1e-5) << name;
#endif
}

TEST(ActivationCheckpointingTest, ModulesOutsideAComposite) {
  auto torch_model = testing::make_classifier();
  try {
    nn::apply_activation_checkpointing(
        *torch_model, [](const std::string& name, const torch::nn::Module&) { return name == "module.0"; });
    FAIL() << "a torch::nn::Sequential child cannot be replaced";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cannot wrap 'module.0'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(nn::apply_activation_checkpointing(*dropout_gpt(),
                                               [](const std::string&, const torch::nn::Module&) { return false; }),
            0);
}

}  // namespace
}  // namespace composer
