// Composer as the peer for small semantics: the same time strings and the same schedulers (with warmup, scale
// schedule ratio and scale_warmup) asked of MosaicML Composer (tests/peer/composer_semantics.py) and of us.
#include "composer/algorithms/alibi.h"
#include "composer/algorithms/ema.h"
#include "composer/algorithms/gated_linear_units.h"
#include "composer/algorithms/gradient_clipping.h"
#include "composer/algorithms/layer_freezing.h"
#include "composer/algorithms/registry.h"
#include "composer/algorithms/sam.h"
#include "composer/algorithms/selective_backprop.h"
#include "composer/algorithms/seq_length_warmup.h"
#include "composer/algorithms/swa.h"
#include "composer/callbacks/early_stopper.h"
#include "composer/callbacks/optimizer_monitor.h"
#include "composer/callbacks/speed_monitor.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/core/time.h"
#include "composer/dist/fully_sharded.h"
#include "composer/loggers/in_memory_logger.h"
#include "composer/metrics/metric.h"
#include "composer/models/composer_model.h"
#include "composer/nn/layers.h"
#include "composer/optim/decoupled_adamw.h"
#include "composer/optim/registry.h"
#include "composer/optim/scheduler.h"
#include "support/python.h"

#include <gtest/gtest.h>
#include <torch/optim/sgd.h>
#include <nlohmann/json.hpp>

#include <array>
#include <filesystem>
#include <functional>

namespace composer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json ask_composer(const json& requests) { return testing::ask_peer("composer_semantics.py", requests); }

// Strings where we and Composer agree, refusals included. Deliberate differences (a bare number, values beyond
// int64, 'nandur', non-ASCII digits) are tested in tests/core/time_test.cpp and listed in docs/differences.md.
const std::vector<std::string> kTimeStrings = {
    "1_000ba", " 5ep",    "5 ep",    "5\tep", "5ep ",        "  5ep  ",  "infdur", "-infdur",  "1e3ba",  "5EP",
    "5Ep",     "0.5DUR",  "",        "1h30m", "1h",          "30m",      "45s",    "1h30m15s", "0h0m0s", "90m",
    "1h70m",   "25h",     "1H30M",   "5sec",  "5iter",       "5SEC",     "1e18ba", "0x10ba",   "+5ep",   "-5ep",
    "5.0ep",   "5.5ep",   ".5dur",   "5.dur", "1__0ba",      "_10ba",    "10_ba",  "inf",      "1h 30m", "2ep2",
    "ba",      "1.5e1ep", "5e-1dur", "1hba",  "infinityDUR", "1e400dur", "5epoch", "5 tok",    "3e4tok"};

TEST(PeerSemanticsTest, TimeStringsParseAsInComposer) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  const json answers = ask_composer({{"time_strings", kTimeStrings}});
  ASSERT_EQ(answers.at("time_strings").size(), kTimeStrings.size());
  for (size_t i = 0; i < kTimeStrings.size(); ++i) {
    const json& a = answers["time_strings"][i];
    const std::string& text = kTimeStrings[i];
    if (a.contains("error")) {
      EXPECT_THROW(Time::from_string(text), std::invalid_argument) << "'" << text << "': Composer says " << a["error"];
      continue;
    }
    try {
      const Time t = Time::from_string(text);
      EXPECT_EQ(to_string(t.unit()), a["unit"].get<std::string>()) << "'" << text << "'";
      EXPECT_EQ(t.value(), std::stod(a["value"].get<std::string>())) << "'" << text << "'";
    } catch (const std::invalid_argument& e) {
      ADD_FAILURE() << "'" << text << "': Composer gives " << a.dump() << ", we throw: " << e.what();
    }
  }
}

// Each case names Composer's class and its keyword arguments; we build ours from the same arguments through the
// scheduler registry (so the registry's names, fields and defaults are checked against Composer too).
struct SchedulerCase {
  std::string cls;
  json kwargs;
  std::string max_duration = "100ba";
  double ssr = 1.0;
};

Time t(const char* s) { return Time::from_string(s); }

// Composer's kwargs as hyperparameter strings: "20ba", 0.1, true, ["30ba", "60ba"] -> "[30ba, 60ba]".
std::map<std::string, std::string> hparams_of(const json& kwargs) {
  std::map<std::string, std::string> h;
  for (const auto& [key, value] : kwargs.items()) {
    if (value.is_string()) {
      h[key] = value.get<std::string>();
    } else if (value.is_array()) {
      std::string list;
      for (const auto& item : value) list += (list.empty() ? "" : ", ") + item.get<std::string>();
      h[key] = "[" + list + "]";
    } else {
      h[key] = value.dump();
    }
  }
  return h;
}

std::vector<SchedulerCase> scheduler_cases() {
  std::vector<SchedulerCase> c;
  for (double ssr : {1.0, 0.5, 2.0}) {
    for (bool scale : {false, true}) {
      const std::string md = ssr == 2.0 ? "200ba" : ssr == 0.5 ? "50ba" : "100ba";  // the Trainer scales max_duration
      c.push_back({"LinearWithWarmupScheduler",
                   {{"t_warmup", "20ba"}, {"alpha_i", 1.0}, {"alpha_f", 0.1}, {"scale_warmup", scale}},
                   md,
                   ssr});
      c.push_back({"CosineAnnealingWithWarmupScheduler",
                   {{"t_warmup", "0.1dur"}, {"alpha_f", 0.05}, {"scale_warmup", scale}},
                   md,
                   ssr});
      c.push_back(
          {"PolynomialWithWarmupScheduler", {{"t_warmup", "2ep"}, {"power", 2.0}, {"scale_warmup", scale}}, md, ssr});
      c.push_back({"MultiStepWithWarmupScheduler",
                   {{"t_warmup", "15ba"}, {"milestones", {"30ba", "60ba"}}, {"gamma", 0.5}, {"scale_warmup", scale}},
                   md,
                   ssr});
      c.push_back(
          {"ConstantWithWarmupScheduler", {{"t_warmup", "30ba"}, {"alpha", 0.7}, {"scale_warmup", scale}}, md, ssr});
    }
    c.push_back({"CosineAnnealingScheduler", {{"t_max", "60ba"}, {"alpha_f", 0.1}}, "100ba", ssr});
    c.push_back({"StepScheduler", {{"step_size", "1ep"}, {"gamma", 0.5}}, "100ba", ssr});
    c.push_back({"MultiStepScheduler", {{"milestones", {"2ep", "45ba"}}, {"gamma", 0.3}}, "100ba", ssr});
    c.push_back({"ConstantScheduler", {{"alpha", 0.25}, {"t_max", "0.4dur"}}, "100ba", ssr});
    c.push_back({"LinearScheduler", {{"alpha_i", 0.2}, {"alpha_f", 1.0}, {"t_max", "80ba"}}, "100ba", ssr});
    c.push_back({"ExponentialScheduler", {{"gamma", 0.8}, {"decay_period", "1ep"}}, "100ba", ssr});
    c.push_back(
        {"CosineAnnealingWarmRestartsScheduler", {{"t_0", "20ba"}, {"t_mult", 2.0}, {"alpha_f", 0.05}}, "100ba", ssr});
    c.push_back({"PolynomialScheduler", {{"power", 0.5}, {"alpha_f", 0.1}}, "100ba", ssr});
  }
  // t_max shorter than max_duration: Composer raises; so do we.
  c.push_back({"LinearWithWarmupScheduler", {{"t_warmup", "10ba"}, {"t_max", "50ba"}}});
  c.push_back({"CosineAnnealingWithWarmupScheduler", {{"t_warmup", "1ep"}, {"t_max", "5ep"}}, "12ep"});
  // Units that cannot be compared: no error, as in Composer.
  c.push_back({"PolynomialWithWarmupScheduler", {{"t_warmup", "0sp"}, {"t_max", "800sp"}}});
  // A zero-length warmup (warns).
  c.push_back({"CosineAnnealingWithWarmupScheduler", {{"t_warmup", "0.001dur"}}});
  return c;
}

TEST(PeerSemanticsTest, SchedulersGiveComposersFactors) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  const int64_t len = 10;
  std::vector<int64_t> batches;
  for (int64_t b = 0; b <= 130; b += 1) batches.push_back(b);
  const auto cases = scheduler_cases();
  json requests = json::array();
  for (const auto& c : cases) {
    requests.push_back({{"class", c.cls},
                        {"kwargs", c.kwargs},
                        {"max_duration", c.max_duration},
                        {"dataloader_len", len},
                        {"ssr", c.ssr},
                        {"batches", batches}});
  }
  const json answers = ask_composer({{"schedulers", requests}});
  ASSERT_EQ(answers.at("schedulers").size(), cases.size());
  int compared = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const json& a = answers["schedulers"][i];
    const std::string what =
        c.cls + " " + c.kwargs.dump() + " max_duration " + c.max_duration + " ssr " + std::to_string(c.ssr);
    const auto built = optim::scheduler_registry().make(c.cls, hparams_of(c.kwargs), c.cls);
    // Its repr re-creates it (how checkpoints and logs record schedulers).
    const auto sched = optim::scheduler_registry().make_from_repr(built->repr());
    EXPECT_EQ(sched->repr(), built->repr());
    State s;
    s.max_duration = t(c.max_duration.c_str());
    s.dataloader_len = len;
    if (a.contains("error")) {
      bool threw = false;
      for (int64_t b : batches) {
        s.timestamp = Timestamp();
        s.timestamp.batch = b;
        s.timestamp.epoch = b / len;
        s.timestamp.batch_in_epoch = b % len;
        try {
          (*sched)(s, c.ssr);
        } catch (const std::invalid_argument&) {
          threw = true;
          break;
        }
      }
      EXPECT_TRUE(threw) << what << ": Composer raises " << a["error"];
      continue;
    }
    for (size_t j = 0; j < batches.size(); ++j) {
      s.timestamp = Timestamp();
      s.timestamp.batch = batches[j];
      s.timestamp.epoch = batches[j] / len;
      s.timestamp.batch_in_epoch = batches[j] % len;
      EXPECT_NEAR((*sched)(s, c.ssr), a["factors"][j].get<double>(), 1e-12) << what << " at batch " << batches[j];
      ++compared;
    }
  }
  EXPECT_GT(compared, 30 * 100);
}

// Composer's apply_gradient_clipping and ours on the same float64 weights and gradients: a conv weight, a linear
// weight, a bias, a scalar, a parameter without a gradient and one whose gradient is zero (adaptive's 0 / 0).
TEST(PeerSemanticsTest, GradientClippingMatchesComposer) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  const std::vector<std::vector<int64_t>> shapes{{4, 3, 3, 3}, {5, 7}, {5}, {}, {6}, {2, 3}};
  auto make_params = [&] {
    auto gen = at::detail::createCPUGenerator(17);
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    std::vector<at::Tensor> params;
    for (size_t i = 0; i < shapes.size(); ++i) {
      at::Tensor p = at::randn(shapes[i], gen, f64).set_requires_grad(true);
      at::Tensor g = at::randn(shapes[i], gen, f64) * (i % 2 ? 3.0 : 0.02);
      if (i == 4) g = at::Tensor();  // no gradient
      if (i == 5) g = at::zeros(shapes[i], f64);
      if (g.defined()) p.mutable_grad() = g;
      params.push_back(p);
    }
    return params;
  };
  auto flat = [](const at::Tensor& t) {
    const at::Tensor c = t.contiguous();
    return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  };
  const std::vector<std::pair<std::string, double>> cases{{"norm", 0.5}, {"norm", 1e6},      {"value", 0.1},
                                                          {"value", 10}, {"adaptive", 0.01}, {"adaptive", 0.5}};
  json requests = json::array();
  for (const auto& [type, threshold] : cases) {
    json params = json::array();
    for (const auto& p : make_params()) {
      params.push_back({{"shape", p.sizes().vec()},
                        {"weight", flat(p.detach())},
                        {"grad", p.grad().defined() ? json(flat(p.grad())) : json(nullptr)}});
    }
    requests.push_back({{"clipping_type", type}, {"clipping_threshold", threshold}, {"params", params}});
  }
  const json answers = ask_composer({{"gradient_clipping", requests}});
  ASSERT_EQ(answers.at("gradient_clipping").size(), cases.size());
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& [type, threshold] = cases[c];
    Hparams h({{"t", type}}, "case");
    functional::ClippingType kind{};
    functional::read_field(h, "t", kind);
    auto params = make_params();
    functional::apply_gradient_clipping(params, kind, threshold);
    const json& grads = answers["gradient_clipping"][c]["grads"];
    for (size_t i = 0; i < params.size(); ++i) {
      if (grads[i].is_null()) {
        EXPECT_FALSE(params[i].grad().defined()) << type << " param " << i;
        continue;
      }
      const auto ours = flat(params[i].grad());
      const auto theirs = grads[i].get<std::vector<double>>();
      ASSERT_EQ(ours.size(), theirs.size());
      for (size_t k = 0; k < ours.size(); ++k)
        EXPECT_NEAR(ours[k], theirs[k], 1e-14 * std::max(1.0, std::abs(theirs[k])))
            << type << " " << threshold << " param " << i << "[" << k << "]";
    }
  }
}

// Composer's SeqLengthWarmup and ours on the same token batch at several points of the schedule, in both modes, with
// and without preserve_end_of_sequence: the same batch and the same logged length and batch size.
TEST(PeerSemanticsTest, SeqLengthWarmupMatchesComposer) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  auto gen = at::detail::createCPUGenerator(5);
  const at::Tensor ids = at::randint(0, 50, {4, 40}, gen, at::TensorOptions().dtype(at::kLong));
  at::Tensor mask = at::ones({4, 40}, at::kLong);
  mask.narrow(1, 30, 10).narrow(0, 0, 2).zero_();  // two rows end at 30
  auto rows = [](const at::Tensor& t) {
    std::vector<std::vector<int64_t>> out;
    for (int64_t i = 0; i < t.size(0); ++i) {
      const at::Tensor r = t[i].contiguous();
      out.emplace_back(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
    }
    return out;
  };
  struct Case {
    std::map<std::string, std::string> hparams;
    json kwargs;
    std::string max_duration;
    int64_t batch;
  };
  std::vector<Case> cases;
  for (int64_t b : {0, 5, 17, 30, 59, 60, 99}) {
    cases.push_back({{{"min_seq_length", "8"}, {"max_seq_length", "40"}, {"step_size", "8"}, {"duration", "0.6"}},
                     {{"min_seq_length", 8}, {"max_seq_length", 40}, {"step_size", 8}, {"duration", 0.6}},
                     "100ba",
                     b});
  }
  cases.push_back({{{"min_seq_length", "8"}, {"max_seq_length", "40"}, {"truncate", "false"}},
                   {{"min_seq_length", 8}, {"max_seq_length", 40}, {"truncate", false}},
                   "10ep",
                   3});
  cases.push_back({{{"min_seq_length", "8"}, {"max_seq_length", "40"}, {"preserve_end_of_sequence", "true"}},
                   {{"min_seq_length", 8}, {"max_seq_length", 40}, {"preserve_end_of_sequence", true}},
                   "10ep",
                   7});
  json requests = json::array();
  for (const auto& c : cases) {
    requests.push_back({{"kwargs", c.kwargs},
                        {"batch", {{"input_ids", rows(ids)}, {"labels", rows(ids)}, {"attention_mask", rows(mask)}}},
                        {"dataloader_len", 10},
                        {"max_duration", c.max_duration},
                        {"batch_index", c.batch}});
  }
  const json answers = ask_composer({{"seq_length_warmup", requests}});
  ASSERT_EQ(answers.at("seq_length_warmup").size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const json& a = answers["seq_length_warmup"][i];
    ASSERT_FALSE(a.contains("error")) << a.dump();
    State s;
    s.batch = Batch({{"input_ids", ids.clone()}, {"labels", ids.clone()}, {"attention_mask", mask.clone()}});
    s.max_duration = Time::from_string(cases[i].max_duration);
    s.dataloader_len = 10;
    s.timestamp.batch = cases[i].batch;
    Logger logger(s);
    algorithms::make_algorithm("seq_length_warmup", cases[i].hparams)->apply(Event::AFTER_DATALOADER, s, logger);
    for (const auto& key : {"input_ids", "labels", "attention_mask"}) {
      EXPECT_EQ(rows(s.batch.at(std::string(key))), a["batch"][key].get<std::vector<std::vector<int64_t>>>())
          << "case " << i << " " << key;
    }
    EXPECT_EQ(s.batch.at(std::string("input_ids")).size(1),
              a["logged"]["seq_length_warmup/curr_seq_len"].get<int64_t>())
        << "case " << i;
  }
}

// Composer's EMA and ours: the smoothing each derives from half_life and update_interval (or takes as given), the
// same refusals, and one compute_ema on float64 parameters and an int64 buffer (averaged, then truncated back).
TEST(PeerSemanticsTest, EMAMatchesComposer) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  struct Case {
    std::map<std::string, std::string> hparams;
    json kwargs;
  };
  const std::vector<Case> cases{
      {{}, json::object()},
      {{{"half_life", "10ba"}, {"update_interval", "2ba"}}, {{"half_life", "10ba"}, {"update_interval", "2ba"}}},
      {{{"half_life", "3ep"}}, {{"half_life", "3ep"}}},
      {{{"half_life", "None"}, {"smoothing", "0.9"}, {"update_interval", "1ba"}},
       {{"half_life", nullptr}, {"smoothing", 0.9}, {"update_interval", "1ba"}}},
      {{{"half_life", "10ba"}, {"smoothing", "0.9"}}, {{"half_life", "10ba"}, {"smoothing", 0.9}}},
      {{{"half_life", "10ba"}, {"update_interval", "1ep"}}, {{"half_life", "10ba"}, {"update_interval", "1ep"}}},
      {{{"half_life", "None"}}, {{"half_life", nullptr}}},
  };
  auto gen = at::detail::createCPUGenerator(3);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor w_model = at::randn({3, 2}, gen, f64), w_ema = at::randn({3, 2}, gen, f64);
  const at::Tensor b_model = at::randn({2}, gen, f64), b_ema = at::randn({2}, gen, f64);
  const at::Tensor n_model = at::full({}, 17, at::kLong), n_ema = at::full({}, 4, at::kLong);
  auto flat = [](const at::Tensor& t) {
    const at::Tensor c = t.to(at::kDouble).contiguous();
    return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  };
  auto module = [](const at::Tensor& w, const at::Tensor& b, const at::Tensor& n) {
    auto m = std::make_shared<torch::nn::Module>();
    m->register_parameter("weight", w.clone());
    m->register_parameter("bias", b.clone());
    m->register_buffer("num_batches_tracked", n.clone());
    return m;
  };
  json tensors = json::array({
      {{"name", "weight"},
       {"shape", {3, 2}},
       {"dtype", "float64"},
       {"buffer", false},
       {"model", flat(w_model)},
       {"ema", flat(w_ema)}},
      {{"name", "bias"},
       {"shape", {2}},
       {"dtype", "float64"},
       {"buffer", false},
       {"model", flat(b_model)},
       {"ema", flat(b_ema)}},
      {{"name", "num_batches_tracked"},
       {"shape", json::array()},
       {"dtype", "int64"},
       {"buffer", true},
       {"model", {17}},
       {"ema", {4}}},
  });
  json requests = json::array();
  for (const auto& c : cases) requests.push_back({{"kwargs", c.kwargs}, {"tensors", tensors}});
  const json answers = ask_composer({{"ema", requests}});
  ASSERT_EQ(answers.at("ema").size(), cases.size());
  int compared = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const json& a = answers["ema"][i];
    if (a.contains("error")) {
      EXPECT_THROW(algorithms::make_algorithm("ema", cases[i].hparams), std::invalid_argument)
          << "case " << i << ": Composer says " << a["error"];
      continue;
    }
    auto algorithm = std::dynamic_pointer_cast<algorithms::EMA>(algorithms::make_algorithm("ema", cases[i].hparams));
    ASSERT_TRUE(algorithm);
    EXPECT_NEAR(algorithm->smoothing(), a["smoothing"].get<double>(), 1e-15) << "case " << i;
    auto model = module(w_model, b_model, n_model);
    auto averaged = algorithms::EMAParameters::of(*module(w_ema, b_ema, n_ema));
    functional::compute_ema(*model, averaged, algorithm->smoothing());
    for (auto* dict : {&averaged.named_parameters_dict, &averaged.named_buffers_dict}) {
      for (const auto& [name, t] : *dict) {
        const auto theirs = a["ema"][name].get<std::vector<double>>();
        const auto ours = flat(t);
        ASSERT_EQ(ours.size(), theirs.size()) << name;
        for (size_t k = 0; k < ours.size(); ++k) EXPECT_NEAR(ours[k], theirs[k], 1e-14) << "case " << i << " " << name;
      }
    }
    ++compared;
  }
  EXPECT_EQ(compared, 4);
}

// Composer's freeze_layers and ours on the same nested model (leaves with parameters, depth first; the last layer
// never frozen) at points before, during and at the end of the schedule: the same depth, fraction and frozen
// parameters, and the frozen ones out of the optimizer.
TEST(PeerSemanticsTest, LayerFreezingMatchesComposer) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  const std::vector<std::array<double, 3>> cases{{0.3, 0.5, 1.0}, {0.5, 0.5, 1.0}, {0.8, 0.5, 1.0},
                                                 {1.0, 0.5, 1.0}, {1.0, 0.0, 0.5}, {0.9, 0.2, 0.75}};
  json requests = json::array();
  for (const auto& c : cases) {
    requests.push_back({{"current_duration", c[0]}, {"freeze_start", c[1]}, {"freeze_level", c[2]}});
  }
  const json answers = ask_composer({{"freeze_layers", requests}});
  ASSERT_EQ(answers.at("freeze_layers").size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const json& a = answers["freeze_layers"][i];
    auto inner = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
        std::make_shared<nn::Linear>(3, 3), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(3, 3)});
    nn::Sequential model(
        {std::make_shared<nn::Linear>(3, 3), inner, std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(3, 2)});
    torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(0.1));
    const auto [depth, fraction] = functional::freeze_layers(model, &optimizer, cases[i][0], cases[i][1], cases[i][2]);
    EXPECT_EQ(depth, a["depth"].get<int64_t>()) << "case " << i;
    EXPECT_NEAR(fraction, a["percentage"].get<double>(), 1e-15) << "case " << i;
    std::vector<bool> requires_grad;
    for (const auto& p : model.parameters()) requires_grad.push_back(p.requires_grad());
    EXPECT_EQ(requires_grad, a["requires_grad"].get<std::vector<bool>>()) << "case " << i;
    size_t in_optimizer = 0;
    for (const auto& g : optimizer.param_groups()) in_optimizer += g.params().size();
    EXPECT_EQ(in_optimizer, a["in_optimizer"].get<size_t>()) << "case " << i;
  }
}

// Composer's ALiBi slopes and bias buffers (causal for GPT, bidirectional for BERT) and ours, for head counts that
// are and are not powers of two: the same float32 values.
TEST(PeerSemanticsTest, AlibiBiasesMatchComposer) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  json requests = json::array();
  std::vector<std::tuple<int64_t, int64_t, bool>> cases;
  for (int64_t heads : {1, 2, 3, 6, 8, 12}) {
    for (bool causal : {true, false}) {
      cases.emplace_back(heads, 10, causal);
      requests.push_back({{"n_heads", heads}, {"max_len", 10}, {"causal", causal}});
    }
  }
  const json answers = ask_composer({{"alibi", requests}});
  ASSERT_EQ(answers.at("alibi").size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto [heads, len, causal] = cases[i];
    const json& a = answers["alibi"][i];
    EXPECT_EQ(functional::alibi_head_slopes(heads), a["slopes"].get<std::vector<double>>()) << heads;
    const at::Tensor bias = functional::alibi_bias(heads, len, causal);
    EXPECT_EQ(bias.sizes().vec(), a["shape"].get<std::vector<int64_t>>()) << heads << " causal " << causal;
    EXPECT_EQ(bias.scalar_type(), at::kFloat);
    const at::Tensor flat = bias.contiguous().view(-1);
    const auto theirs = a["bias"].get<std::vector<double>>();
    ASSERT_EQ(static_cast<size_t>(flat.numel()), theirs.size());
    for (size_t k = 0; k < theirs.size(); ++k)
      EXPECT_EQ(static_cast<double>(flat[static_cast<int64_t>(k)].item<float>()), theirs[k]) << heads << " " << k;
  }
}

// SAMOptimizer around SGD with momentum, SAM steps every other step (interval 2): the same weights and the same
// losses returned by step() as Composer's SAMOptimizer.
TEST(PeerSemanticsTest, SAMOptimizerStepsAsComposers) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  const json spec = {{"weight", {{0.1, 0.2, 0.3}, {-0.1, 0.5, 0.2}}},
                     {"bias", {0.0, 0.1}},
                     {"x", {{1, 2, 3}, {0.5, -1, 2}, {0, 1, -1}, {2, 0, 1}}},
                     {"y", {{1, 0}, {0, 1}, {1, 1}, {0.5, 0.5}}},
                     {"lr", 0.1},
                     {"momentum", 0.9},
                     {"rho", 0.05},
                     {"epsilon", 1e-12},
                     {"steps", 5}};
  for (int64_t interval : {1, 2}) {
    json request = spec;
    request["interval"] = interval;
    const json answer = ask_composer({{"sam", json::array({request})}}).at("sam").at(0);
    auto model = std::make_shared<nn::Linear>(3, 2);
    {
      at::NoGradGuard no_grad;
      model->weight.copy_(torch::tensor({0.1, 0.2, 0.3, -0.1, 0.5, 0.2}, at::kFloat).view({2, 3}));
      model->bias.copy_(torch::tensor({0.0, 0.1}, at::kFloat));
    }
    const at::Tensor x =
        torch::tensor(std::vector<double>{1, 2, 3, 0.5, -1, 2, 0, 1, -1, 2, 0, 1}, at::kFloat).view({4, 3});
    const at::Tensor y = torch::tensor(std::vector<double>{1, 0, 0, 1, 1, 1, 0.5, 0.5}, at::kFloat).view({4, 2});
    auto base = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    algorithms::SAMOptimizer sam(base, 0.05, 1e-12, interval);
    std::vector<double> losses;
    for (int step = 0; step < 5; ++step) {
      losses.push_back(sam.step([&] {
                            sam.zero_grad();
                            at::Tensor loss = at::mse_loss(model->forward(x), y);
                            loss.backward();
                            return loss.detach();
                          })
                           .item<double>());
    }
    const auto theirs = answer["losses"].get<std::vector<double>>();
    ASSERT_EQ(losses.size(), theirs.size());
    for (size_t i = 0; i < losses.size(); ++i) EXPECT_NEAR(losses[i], theirs[i], 1e-6) << "interval " << interval;
    const auto w = answer["weight"].get<std::vector<double>>();
    const at::Tensor flat = model->weight.detach().flatten();
    for (size_t i = 0; i < w.size(); ++i)
      EXPECT_NEAR(flat[static_cast<int64_t>(i)].item<double>(), w[i], 1e-6) << "interval " << interval;
    const auto b = answer["bias"].get<std::vector<double>>();
    for (size_t i = 0; i < b.size(); ++i)
      EXPECT_NEAR(model->bias[static_cast<int64_t>(i)].item<double>(), b[i], 1e-6) << "interval " << interval;
  }
}

// SWA's pieces against torch.optim.swa_utils: SWALR's rates (both strategies, with and without annealing) and
// AveragedModel's running mean.
TEST(PeerSemanticsTest, SWAMatchesTorchSwaUtils) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  struct Case {
    double lr, swa_lr;
    int64_t anneal;
    const char* strategy;
  };
  const std::vector<Case> cases{{0.5, 0.05, 3, "cos"},
                                {0.5, 0.05, 3, "linear"},
                                {0.1, 1.0, 10, "cos"},
                                {0.2, 0.2, 1, "linear"},
                                {0.3, 0.01, 0, "cos"}};
  json requests = json::array();
  for (const auto& c : cases) {
    requests.push_back(
        {{"lr", c.lr}, {"swa_lr", c.swa_lr}, {"anneal_epochs", c.anneal}, {"strategy", c.strategy}, {"steps", 12}});
  }
  const json weights = {{1.0, 2.0}, {3.0, 4.0}, {5.0, 9.0}, {-2.0, 0.5}};
  const json answers = ask_composer({{"swalr", requests}, {"averaged_model", json::array({{{"weights", weights}}})}});
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto theirs = answers["swalr"][i].get<std::vector<double>>();
    at::Tensor param = torch::zeros({1}, torch::requires_grad());
    torch::optim::SGD optimizer({param}, torch::optim::SGDOptions(cases[i].lr));
    functional::SWALR scheduler(
        optimizer, cases[i].swa_lr, cases[i].anneal,
        std::string(cases[i].strategy) == "cos" ? functional::AnnealStrategy::COS : functional::AnnealStrategy::LINEAR);
    std::vector<double> ours{optimizer.param_groups()[0].options().get_lr()};
    for (int k = 0; k < 12; ++k) {
      scheduler.step(optimizer);
      ours.push_back(optimizer.param_groups()[0].options().get_lr());
    }
    ASSERT_EQ(ours.size(), theirs.size());
    for (size_t k = 0; k < ours.size(); ++k) EXPECT_NEAR(ours[k], theirs[k], 1e-12) << "case " << i << " step " << k;
  }
  torch::nn::Module model;
  at::Tensor weight = model.register_parameter("weight", torch::zeros({1, 2}));
  at::Tensor running = model.register_buffer("running", torch::zeros({2}));
  auto averaged = functional::AveragedWeights::of(model);
  for (const auto& w : weights) {
    at::NoGradGuard no_grad;
    weight.copy_(torch::tensor(w.get<std::vector<double>>(), at::kFloat).view({1, 2}));
    running.copy_(torch::tensor(w.get<std::vector<double>>(), at::kFloat) * 10);
    functional::update_averaged_weights(averaged, model);
  }
  const json& a = answers["averaged_model"][0];
  EXPECT_EQ(averaged.n_averaged, a["n_averaged"].get<int64_t>());
  const auto theirs = a["weight"].get<std::vector<double>>();
  for (size_t k = 0; k < theirs.size(); ++k)
    EXPECT_FLOAT_EQ(averaged.parameters.at("weight").view(-1)[static_cast<int64_t>(k)].item<float>(), theirs[k]);
  // The buffers are the model's at the last update (AveragedModel keeps them in sync; they are not averaged), and
  // loading the average into the model gives it those, as Composer's SWA does at swa_end.
  const auto their_running = a["running"].get<std::vector<double>>();
  {
    at::NoGradGuard no_grad;
    running.fill_(0);
  }
  functional::load_averaged_weights(averaged, model);
  for (size_t k = 0; k < their_running.size(); ++k)
    EXPECT_FLOAT_EQ(running[static_cast<int64_t>(k)].item<float>(), their_running[k]) << "running[" << k << "]";
}

TEST(PeerSemanticsTest, SelectiveBackpropSchedulesAsComposer) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  json requests = json::array();
  std::vector<std::tuple<double, int64_t, double, double, int64_t>> cases;
  for (double d : {0.0, 0.3, 0.5, 0.7, 0.9, 1.0})
    for (int64_t b : {0, 1, 2, 3, 7})
      for (int64_t interrupt : {0, 2, 3}) cases.emplace_back(d, b, 0.5, 0.9, interrupt);
  cases.emplace_back(0.2, 4, 0.0, 1.0, 1);
  for (const auto& [d, b, start, end, interrupt] : cases) {
    requests.push_back(
        {{"current_duration", d}, {"batch_idx", b}, {"start", start}, {"end", end}, {"interrupt", interrupt}});
  }
  const auto theirs = ask_composer({{"should_selective_backprop", requests}})["should_selective_backprop"];
  ASSERT_EQ(theirs.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto [d, b, start, end, interrupt] = cases[i];
    EXPECT_EQ(functional::should_selective_backprop(d, b, start, end, interrupt), theirs[i].get<bool>())
        << "case " << i;
  }
}

// A GatedMLP with Composer's BERTGatedFFOutput's weights computes its output before the residual LayerNorm (which
// our BERT layer keeps outside the MLP): the same values.
TEST(PeerSemanticsTest, GatedMLPMatchesComposersGatedOutput) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  const int64_t d = 4, f = 6;
  torch::manual_seed(3);
  for (bool gated_bias : {false, true}) {
    nn::GatedMLP mlp(d, f, std::make_shared<nn::GELU>(), 0.0, gated_bias, !gated_bias);
    json weights = json::object();
    for (const auto& item : mlp.named_parameters()) {
      const at::Tensor t = item.value().detach().contiguous();
      std::vector<double> flat(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
      if (t.dim() == 2) {
        json rows = json::array();
        for (int64_t r = 0; r < t.size(0); ++r)
          rows.push_back(std::vector<double>(flat.begin() + r * t.size(1), flat.begin() + (r + 1) * t.size(1)));
        weights[item.key()] = rows;
      } else {
        weights[item.key()] = flat;
      }
    }
    const at::Tensor x = torch::randn({3, d}), residual = torch::randn({3, d});
    auto rows = [](const at::Tensor& t) {
      json out = json::array();
      for (int64_t r = 0; r < t.size(0); ++r) {
        const at::Tensor row = t[r].contiguous();
        out.push_back(std::vector<double>(row.data_ptr<float>(), row.data_ptr<float>() + row.numel()));
      }
      return out;
    };
    const json request = {{"d", d},
                          {"f", f},
                          {"gated_bias", gated_bias},
                          {"non_gated_bias", !gated_bias},
                          {"weights", weights},
                          {"x", rows(x)},
                          {"residual", rows(residual)}};
    const auto theirs = ask_composer({{"gated_ff", json::array({request})}})["gated_ff"][0].get<std::vector<double>>();
    at::NoGradGuard no_grad;
    const at::Tensor ours = at::layer_norm(mlp.forward(x) + residual, {d}, {}, {}, 1e-12).flatten();
    ASSERT_EQ(static_cast<size_t>(ours.numel()), theirs.size());
    for (size_t k = 0; k < theirs.size(); ++k)
      EXPECT_NEAR(ours[static_cast<int64_t>(k)].item<double>(), theirs[k], 1e-5) << "gated_bias " << gated_bias;
  }
}

// Composer's EarlyStopper and ours, asked the same sequence of evaluations: the same checks stop training (default
// comparisons by name, explicit comp, min_delta, patience in batches, in epochs and as a bare integer).
TEST(PeerSemanticsTest, EarlyStopperStopsAsComposers) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  struct Case {
    std::string monitor;
    json comp;  // null or the string
    double min_delta;
    json patience;                              // a time string or an integer (epochs)
    std::vector<std::array<double, 3>> checks;  // epoch, batch, value (exact in float32)
  };
  std::vector<std::array<double, 3>> per_batch, per_epoch;
  const std::vector<double> rising = {0.5, 0.625, 0.625, 0.625, 0.75, 0.75, 0.75, 0.75, 0.8125, 0.5};
  const std::vector<double> falling = {1.0, 0.9375, 0.75, 0.75, 0.6875, 0.5, 0.5, 0.5, 0.25, 0.5};
  for (size_t i = 0; i < rising.size(); ++i) per_batch.push_back({0.0, double(i + 1), rising[i]});
  for (size_t i = 0; i < falling.size(); ++i) per_epoch.push_back({double(i + 1), double(10 * (i + 1)), falling[i]});
  auto with = [](std::vector<std::array<double, 3>> checks, const std::vector<double>& values) {
    for (size_t i = 0; i < checks.size(); ++i) checks[i][2] = values[i];
    return checks;
  };
  const std::vector<Case> cases = {
      {"Accuracy", nullptr, 0.0, "2ba", per_batch},
      {"Accuracy", nullptr, 0.0, "0ba", per_batch},
      {"Accuracy", nullptr, 0.125, "1ba", per_batch},
      {"val_loss", nullptr, 0.0, "1ep", with(per_epoch, falling)},
      {"val_loss", nullptr, 0.125, "1ep", with(per_epoch, falling)},
      {"Accuracy", "lt", 0.0, 1, with(per_epoch, falling)},
      {"Accuracy", "gt", 0.0, 2, with(per_epoch, falling)},
      {"CrossEntropy", nullptr, 0.0, "3ba", per_batch},
  };
  json requests = json::array();
  for (const auto& c : cases) {
    requests.push_back({{"monitor", c.monitor},
                        {"comp", c.comp},
                        {"min_delta", c.min_delta},
                        {"patience", c.patience},
                        {"checks", c.checks}});
  }
  const auto theirs = ask_composer({{"early_stopper", requests}})["early_stopper"];
  ASSERT_EQ(theirs.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    EarlyStopperOptions options =
        EarlyStopperOptions().monitor(c.monitor).dataloader_label("eval").min_delta(c.min_delta);
    if (c.comp.is_string()) options.comp(c.comp.get<std::string>());
    options.patience(c.patience.is_string() ? Time::from_string(c.patience.get<std::string>())
                                            : Time::from_epoch(c.patience.get<int64_t>()));
    EarlyStopper stopper(options);
    State s;
    Logger logger(s);
    s.dataloader_label = "eval";
    std::vector<bool> ours;
    for (const auto& [epoch, batch, value] : c.checks) {
      s.max_duration = Time::from_batch(100000);
      s.timestamp.epoch = static_cast<int64_t>(epoch);
      s.timestamp.batch = static_cast<int64_t>(batch);
      s.eval_metric_values = {{canonical_metric_name(c.monitor), value}};
      stopper.eval_end(s, logger);
      ours.push_back(!(*s.max_duration == Time::from_batch(100000)));
    }
    EXPECT_EQ(ours, theirs[i].get<std::vector<bool>>()) << "case " << i << " (" << c.monitor << ")";
  }
}

// OptimizerMonitor over DecoupledAdamW: the same keys and values as Composer's after the same steps (float64).
TEST(PeerSemanticsTest, OptimizerMonitorLogsComposersNorms) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  const json spec = {{"lr", 0.01},
                     {"betas", {0.9, 0.95}},
                     {"eps", 1e-8},
                     {"weight_decay", 1e-5},
                     {"params",
                      {{{"name", "w"}, {"shape", {2, 2}}, {"weight", {1.0, 2.0, 3.0, 4.0}}},
                       {{"name", "b"}, {"shape", {2}}, {"weight", {0.5, -0.5}}}}},
                     {"grads",
                      {{{0.1, 0.2, 0.3, 0.4}, {1.0, -1.0}},
                       {{0.2, 0.1, -0.3, 0.0}, {0.5, 0.25}},
                       {{0.0, 0.0, 0.0, 0.0}, {-2.0, 0.5}}}}};
  const json theirs = ask_composer({{"optimizer_metrics", json::array({spec})}})["optimizer_metrics"].at(0);

  // Composer's model is a Module whose parameters are w and b; ours is a ComposerClassifier around the same, so its
  // names carry the "module." prefix that Composer's ComposerClassifier would give them too.
  struct Params : torch::nn::Module {
    Params() {
      w = register_parameter("w", torch::tensor({1.0, 2.0, 3.0, 4.0}, torch::kDouble).reshape({2, 2}));
      b = register_parameter("b", torch::tensor({0.5, -0.5}, torch::kDouble));
    }
    at::Tensor forward(const at::Tensor& x) { return x.matmul(w) + b; }
    at::Tensor w, b;
  };
  auto params = std::make_shared<Params>();
  State s;
  s.model = ComposerClassifier::wrap(params);
  s.optimizer = std::make_shared<optim::DecoupledAdamW>(
      std::vector<at::Tensor>{params->w, params->b},
      optim::DecoupledAdamWOptions(0.01).betas(std::make_tuple(0.9, 0.95)).eps(1e-8).weight_decay(1e-5));
  for (const auto& step : spec["grads"]) {
    params->w.mutable_grad() = torch::tensor(step[0].get<std::vector<double>>(), torch::kDouble).reshape({2, 2});
    params->b.mutable_grad() = torch::tensor(step[1].get<std::vector<double>>(), torch::kDouble);
    s.optimizer->step();
  }
  auto mem = std::make_shared<InMemoryLogger>();
  Logger logger(s, {mem});
  s.timestamp.batch = 3;
  OptimizerMonitor(OptimizerMonitorOptions().batch_log_interval(1)).batch_end(s, logger);

  ASSERT_EQ(mem->most_recent_values.size(), theirs.size()) << theirs.dump();
  for (const auto& [key, value] : theirs.items()) {
    const std::string ours_key = key == "l2_norm/grad/global"
                                     ? key
                                     : key.substr(0, key.rfind('/') + 1) + "module." + key.substr(key.rfind('/') + 1);
    ASSERT_TRUE(mem->most_recent_values.count(ours_key)) << ours_key;
    EXPECT_NEAR(mem->most_recent_values.at(ours_key), value.get<double>(), 1e-12 * (1 + std::abs(value.get<double>())))
        << key;
  }
}

// SpeedMonitor's peak-flops lookup: Composer's get_gpu_flops_available for the names CUDA devices report.
TEST(PeerSemanticsTest, PeakFlopsTableIsComposers) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  const std::vector<std::string> names = {"NVIDIA H200",       "NVIDIA H100 80GB HBM3",   "NVIDIA H100 PCIe",
                                          "NVIDIA H100 HBM2e", "NVIDIA A100-SXM4-80GB",   "NVIDIA A100-PCIE-40GB",
                                          "NVIDIA A10",        "Tesla V100-SXM2-16GB",    "Tesla V100-PCIE-32GB",
                                          "Tesla T4",          "NVIDIA GeForce RTX 4090", "NVIDIA L4"};
  const std::vector<std::pair<std::string, Precision>> precisions = {
      {"fp32", Precision::FP32}, {"amp_fp16", Precision::AMP_FP16}, {"amp_bf16", Precision::AMP_BF16}};
  json requests = json::array();
  for (const auto& n : names)
    for (const auto& [text, p] : precisions) requests.push_back({{"device_name", n}, {"precision", text}});
  const auto theirs = ask_composer({{"gpu_flops", requests}})["gpu_flops"];
  ASSERT_EQ(theirs.size(), requests.size());
  size_t i = 0;
  for (const auto& n : names)
    for (const auto& [text, p] : precisions) {
      const auto ours = gpu_flops_available(n, p);
      if (theirs[i].is_null()) {
        EXPECT_FALSE(ours.has_value()) << n << " " << text;
      } else {
        ASSERT_TRUE(ours.has_value()) << n << " " << text;
        EXPECT_EQ(*ours, theirs[i].get<double>()) << n << " " << text;
      }
      ++i;
    }
}

// FSDP's mixed_precision: each preset and dict resolves, for each precision, to the dtypes Composer's
// get_mixed_precision gives; what Composer cannot interpret we refuse too.
TEST(PeerSemanticsTest, FsdpMixedPrecisionResolvesAsComposers) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  const std::vector<std::pair<std::string, at::ScalarType>> precisions = {
      {"fp32", at::kFloat}, {"amp_fp16", at::kHalf}, {"amp_bf16", at::kBFloat16}};
  const std::vector<json> settings = {"DEFAULT",
                                      "PURE",
                                      "FULL",
                                      "default",
                                      "HALF",
                                      json{{"param_dtype", "bf16"}},
                                      json{{"param_dtype", "float16"}, {"reduce_dtype", "fp32"}},
                                      json{{"buffer_dtype", "torch.bfloat16"}, {"reduce_dtype", "amp_bf16"}}};
  json requests = json::array();
  for (const auto& [text, dtype] : precisions)
    for (const auto& mp : settings) requests.push_back({{"precision", text}, {"mixed_precision", mp}});
  const auto theirs = ask_composer({{"fsdp_mixed_precision", requests}})["fsdp_mixed_precision"];
  ASSERT_EQ(theirs.size(), requests.size());
  const auto name = [](const std::optional<at::ScalarType>& d) -> json {
    if (!d) return nullptr;
    switch (*d) {
      case at::kFloat:
        return "float32";
      case at::kHalf:
        return "float16";
      case at::kBFloat16:
        return "bfloat16";
      default:
        return c10::toString(*d);
    }
  };
  size_t i = 0;
  for (const auto& [text, dtype] : precisions)
    for (const auto& mp : settings) {
      const auto& answer = theirs[i++];
      const std::string what = text + " " + mp.dump();
      dist::FSDPMixedPrecision ours;
      try {
        if (mp.is_string()) {
          ours = dist::FSDPMixedPrecision::of(mp.get<std::string>());
        } else {
          dist::MixedPrecisionDtypes d;
          for (const auto& [key, value] : mp.items()) {
            const auto t = dist::mixed_precision_dtype_from_string(value.get<std::string>(), key);
            (key == "param_dtype" ? d.param_dtype : key == "reduce_dtype" ? d.reduce_dtype : d.buffer_dtype) = t;
          }
          ours = dist::FSDPMixedPrecision::custom(d);
        }
        const dist::MixedPrecisionDtypes r = dist::resolve_mixed_precision(ours, dtype);
        ASSERT_FALSE(answer.contains("error")) << what << ": Composer refuses it: " << answer.dump();
        EXPECT_EQ(name(r.param_dtype), answer["param_dtype"]) << what;
        EXPECT_EQ(name(r.reduce_dtype), answer["reduce_dtype"]) << what;
        EXPECT_EQ(name(r.buffer_dtype), answer["buffer_dtype"]) << what;
      } catch (const std::invalid_argument& e) {
        EXPECT_TRUE(answer.contains("error"))
            << what << ": we refuse it (" << e.what() << "), Composer gives " << answer.dump();
      }
    }
}

}  // namespace
}  // namespace composer
