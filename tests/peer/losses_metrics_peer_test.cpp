// Composer's losses (soft_cross_entropy, binary_cross_entropy_with_logits, DiceLoss), metrics (MIoU, Dice) and
// Initializer names, and torchmetrics' BinaryF1Score and BinaryAUROC, asked of the Python side
// (tests/peer/composer_losses_metrics.py) and of us on the same inputs.
#include "composer/composer.h"
#include "support/python.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>

namespace composer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json to_json(const at::Tensor& t) {
  const bool integral = !t.is_floating_point();
  const at::Tensor flat = t.reshape({-1}).to(integral ? at::kLong : at::kDouble).contiguous();
  json data = json::array();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    if (integral) {
      data.push_back(flat.data_ptr<int64_t>()[i]);
    } else {
      data.push_back(flat.data_ptr<double>()[i]);
    }
  }
  return {{"shape", t.sizes().vec()}, {"data", data}, {"dtype", integral ? "int64" : "float64"}};
}

at::Tensor from_json(const json& j) {
  std::vector<double> data = j.at("data").get<std::vector<double>>();
  return at::tensor(data, at::kDouble).reshape(j.at("shape").get<std::vector<int64_t>>());
}

json ask_python(const json& requests) { return testing::ask_peer("composer_losses_metrics.py", requests); }

class LossesMetricsPeerTest : public ::testing::Test {
 protected:
  void SetUp() override { COMPOSER_REQUIRE_PYTHON("composer torchmetrics"); }
};

struct LossCase {
  std::string loss;
  at::Tensor input, target, weight;
  json kwargs = json::object();
};

at::Tensor our_loss(const LossCase& c) {
  const json& k = c.kwargs;
  if (c.loss == "soft_cross_entropy") {
    SoftCrossEntropyOptions o;
    if (k.contains("reduction")) o.reduction(k["reduction"]);
    if (k.contains("ignore_index")) o.ignore_index(k["ignore_index"]);
    if (c.weight.defined()) o.weight(c.weight);
    return soft_cross_entropy(c.input, c.target, o);
  }
  if (c.loss == "binary_cross_entropy_with_logits") {
    BinaryCrossEntropyOptions o;
    if (k.contains("reduction")) o.reduction(k["reduction"]);
    if (k.contains("scale_by_batch_size")) o.scale_by_batch_size(k["scale_by_batch_size"]);
    return binary_cross_entropy_with_logits(c.input, c.target, o);
  }
  if (c.loss == "dice_loss") {
    DiceLossOptions o;
    for (const auto& [key, value] : k.items()) {
      if (key == "reduction") o.reduction(value);
      if (key == "sigmoid") o.sigmoid(value);
      if (key == "softmax") o.softmax(value);
      if (key == "squared_pred") o.squared_pred(value);
      if (key == "jaccard") o.jaccard(value);
      if (key == "batch") o.batch(value);
      if (key == "ignore_absent_classes") o.ignore_absent_classes(value);
    }
    return DiceLoss(o)(c.input, c.target);
  }
  return ensure_targets_one_hot(c.input, c.target);
}

std::vector<LossCase> loss_cases() {
  torch::manual_seed(3);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor logits = at::randn({6, 5}, f64);
  at::Tensor indices = at::randint(0, 5, {6}, at::kLong);
  at::Tensor with_ignored = indices.clone();
  with_ignored[2] = -100;
  const at::Tensor dense = at::softmax(at::randn({6, 5}, f64), 1) * 0.9;  // total probability below 1
  const at::Tensor image = at::randn({2, 3, 4, 4}, f64);
  at::Tensor pixels = at::randint(0, 2, {2, 4, 4}, at::kLong);  // class 2 absent
  pixels[1][0][0] = 2;
  const at::Tensor pixel_probs = at::softmax(at::randn({2, 3, 4, 4}, f64), 1);
  std::vector<LossCase> cases;
  for (const char* r : {"mean", "sum", "none"}) {
    cases.push_back({"soft_cross_entropy", logits, with_ignored, at::Tensor(), {{"reduction", r}}});
    cases.push_back({"soft_cross_entropy", logits, dense, {}, {{"reduction", r}}});
    cases.push_back({"binary_cross_entropy_with_logits", logits, indices, {}, {{"reduction", r}}});
  }
  cases.push_back({"soft_cross_entropy", image, pixel_probs, at::tensor({0.5, 1.0, 2.0}, f64)});
  cases.push_back({"soft_cross_entropy", image, pixels, at::tensor({0.5, 1.0, 2.0}, f64)});
  cases.push_back({"binary_cross_entropy_with_logits", logits, dense, {}, {{"scale_by_batch_size", false}}});
  for (const json& k : std::vector<json>{json::object(),
                                         {{"softmax", true}},
                                         {{"sigmoid", true}, {"squared_pred", true}},
                                         {{"jaccard", true}, {"batch", true}},
                                         {{"softmax", true}, {"ignore_absent_classes", true}},
                                         {{"batch", true}, {"ignore_absent_classes", true}},
                                         {{"reduction", "none"}},
                                         {{"reduction", "sum"}, {"softmax", true}}}) {
    cases.push_back({"dice_loss", image, pixels, {}, k});
  }
  cases.push_back({"dice_loss", logits, indices, {}, {{"softmax", true}}});  // 2-D: every dimension summed
  cases.push_back({"ensure_targets_one_hot", logits.narrow(0, 0, 3), at::tensor({0, -1, 4}, at::kLong), at::Tensor()});
  return cases;
}

json loss_requests(const std::vector<LossCase>& cases) {
  json requests = json::array();
  for (const auto& c : cases) {
    json r = {{"loss", c.loss}, {"input", to_json(c.input)}, {"target", to_json(c.target)}, {"kwargs", c.kwargs}};
    if (c.weight.defined()) r["weight"] = to_json(c.weight);
    requests.push_back(r);
  }
  return requests;
}

void check_losses(const json& answers) {
  const auto cases = loss_cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    const at::Tensor theirs = from_json(answers["losses"][i]);
    const at::Tensor ours = our_loss(cases[i]).to(at::kDouble);
    EXPECT_EQ(ours.sizes(), theirs.sizes()) << cases[i].loss << " " << cases[i].kwargs.dump();
    if (ours.sizes() != theirs.sizes()) continue;
    EXPECT_TRUE(at::allclose(ours, theirs, 1e-6, 1e-7)) << cases[i].loss << " " << cases[i].kwargs.dump() << "\n"
                                                        << ours << "\n"
                                                        << theirs;
  }
}

struct MetricCase {
  std::string name;
  json kwargs;
  std::vector<std::pair<at::Tensor, at::Tensor>> updates;
};

std::shared_ptr<Metric> our_metric(const MetricCase& c) {
  if (c.name == "MIoU") return std::make_shared<MIoU>(c.kwargs["num_classes"], c.kwargs.value("ignore_index", -1));
  if (c.name == "Dice") return std::make_shared<Dice>(c.kwargs["num_classes"]);
  if (c.name == "BinaryF1Score") return std::make_shared<BinaryF1Score>(c.kwargs.value("threshold", 0.5));
  return std::make_shared<BinaryAUROC>();
}

std::vector<MetricCase> metric_cases() {
  torch::manual_seed(4);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  std::vector<MetricCase> cases;
  MetricCase miou{"MIoU", {{"num_classes", 4}, {"ignore_index", -1}}, {}};
  for (int i = 0; i < 3; ++i) {
    at::Tensor target = at::randint(-1, 4, {2, 3, 3}, at::kLong);
    miou.updates.emplace_back(at::randn({2, 4, 3, 3}, f64), target);
  }
  cases.push_back(miou);
  MetricCase dice{"Dice", {{"num_classes", 2}}, {}};
  dice.updates.emplace_back(at::randn({2, 3, 4, 4}, f64), at::randint(0, 3, {2, 4, 4}, at::kLong));
  dice.updates.emplace_back(at::randn({2, 3, 4, 4}, f64), at::randint(0, 2, {2, 4, 4}, at::kLong));  // no class 2
  cases.push_back(dice);
  for (const json& k : std::vector<json>{json::object(), {{"threshold", 0.3}}}) {
    MetricCase f1{"BinaryF1Score", k, {}};
    f1.updates.emplace_back(at::randn({10}, f64) * 3, at::randint(0, 2, {10}, at::kLong));  // logits
    f1.updates.emplace_back(at::rand({7}, f64), at::randint(0, 2, {7}, at::kLong));         // probabilities
    cases.push_back(f1);
  }
  cases.push_back({"BinaryF1Score", json::object(), {{at::full({4}, 0.1, f64), at::zeros({4}, at::kLong)}}});
  MetricCase auroc{"BinaryAUROC", json::object(), {}};
  auroc.updates.emplace_back(at::rand({12}, f64).mul(10).round().div(10), at::randint(0, 2, {12}, at::kLong));
  auroc.updates.emplace_back(at::randn({9}, f64) * 2, at::randint(0, 2, {9}, at::kLong));
  cases.push_back(auroc);
  return cases;
}

json metric_requests(const std::vector<MetricCase>& cases) {
  json requests = json::array();
  for (const auto& c : cases) {
    json updates = json::array();
    for (const auto& [preds, target] : c.updates)
      updates.push_back({{"preds", to_json(preds)}, {"target", to_json(target)}});
    requests.push_back({{"metric", c.name}, {"kwargs", c.kwargs}, {"updates", updates}});
  }
  return requests;
}

void check_metrics(const json& answers) {
  const auto cases = metric_cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    auto metric = our_metric(cases[i]);
    for (const auto& [preds, target] : cases[i].updates) metric->update(preds, target);
    const double theirs = answers["metrics"][i].get<double>();
    EXPECT_NEAR(metric->compute(), theirs, 1e-5 * std::max(1.0, std::abs(theirs)))
        << cases[i].name << " " << cases[i].kwargs.dump();
  }
}

// The same module tree in torch::nn and in this library's layers, initialised by each of Composer's Initializer
// names after the same seed, gives Composer's weights: the same draws in the same order.
void check_initializers(const json& answers) {
  const std::vector<std::string> names = models::initializer_names();
  for (size_t i = 0; i < names.size(); ++i) {
    auto torch_tree = std::make_shared<torch::nn::Module>();  // Python's nested nn.Sequential, child by child
    torch_tree->register_module("0", torch::nn::Linear(5, 4));
    torch_tree->register_module("1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 2, 3)));
    torch_tree->register_module("2", torch::nn::BatchNorm2d(2));
    auto inner = std::make_shared<torch::nn::Module>();
    inner->register_module("0", torch::nn::Linear(4, 3));
    inner->register_module("1", torch::nn::BatchNorm2d(3));
    torch_tree->register_module("3", inner);
    auto ours = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
        std::make_shared<nn::Linear>(5, 4), std::make_shared<nn::Conv2d>(3, 2, 3), std::make_shared<nn::BatchNorm2d>(2),
        std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
            std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::BatchNorm2d>(3)})});
    const auto initializer = models::initializer_from_string(names[i]);
    torch::manual_seed(17);
    models::apply_initializer(*torch_tree, initializer);
    torch::manual_seed(17);
    models::apply_initializer(*ours, initializer);
    // The tensors this initializer sets (the others keep what each side's construction drew).
    const bool batch_norm = names[i].rfind("bn_", 0) == 0, bias = names[i] == "linear_log_constant_bias";
    const std::set<std::string> set_by_it = batch_norm
                                                ? std::set<std::string>{"2.weight", "2.bias", "3.1.weight", "3.1.bias"}
                                            : bias ? std::set<std::string>{"0.bias", "3.0.bias"}
                                                   : std::set<std::string>{"0.weight", "1.weight", "3.0.weight"};
    const auto our_params = ours->named_parameters();
    for (const auto& p : torch_tree->named_parameters()) {
      if (!set_by_it.count(p.key())) continue;
      EXPECT_TRUE(answers["initializers"][i].contains(p.key())) << p.key();
      if (!answers["initializers"][i].contains(p.key())) continue;
      const at::Tensor theirs = from_json(answers["initializers"][i][p.key()]).to(at::kFloat);
      EXPECT_TRUE(at::equal(p.value(), theirs)) << names[i] << " " << p.key();
      EXPECT_TRUE(at::equal(our_params[p.key()], theirs)) << names[i] << " ours " << p.key();
    }
  }
}

// Every request in one Python process: importing Composer takes seconds.
TEST_F(LossesMetricsPeerTest, LossesMetricsAndInitializersEqualComposers) {
  json initializers = json::array();
  for (const auto& n : models::initializer_names()) initializers.push_back({{"name", n}, {"seed", 17}});
  const json answers = ask_python({{"losses", loss_requests(loss_cases())},
                                   {"metrics", metric_requests(metric_cases())},
                                   {"initializers", initializers}});
  {
    SCOPED_TRACE("losses");
    check_losses(answers);
  }
  {
    SCOPED_TRACE("metrics");
    check_metrics(answers);
  }
  {
    SCOPED_TRACE("initializers");
    check_initializers(answers);
  }
}

}  // namespace
}  // namespace composer
