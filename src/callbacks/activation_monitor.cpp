#include "composer/callbacks/activation_monitor.h"

#include "callbacks/detail/interval_schedule.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"
#include "composer/nn/layer.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <utility>

namespace composer {
namespace {

using Metrics = std::map<std::string, double>;

// Composer's add_metrics for each row of `rows` [B, ...] (a 1-d tensor has rows of one value): the l2 norm over the
// last dimension averaged, the mean, the kurtosis over the last dimension averaged, and the max over the last
// dimension averaged; computed in the tensor's own dtype, as Composer does.
void add_row_metrics(Metrics& metrics, const std::string& name, const std::string& suffix, at::Tensor rows,
                     bool per_row) {
  rows = rows.detach();
  if (rows.dim() == 1) rows = rows.unsqueeze(1);
  const int64_t n = rows.size(0);
  const auto per = [n](const at::Tensor& t) { return t.reshape({n, -1}).mean(1); };
  const at::Tensor mean = rows.mean(-1, /*keepdim=*/true);
  const at::Tensor diffs = rows - mean;
  const at::Tensor kurtosis = diffs.pow(4).mean(-1) / diffs.pow(2).mean(-1).pow(2);
  const at::Tensor all =
      at::stack({per(at::linalg_vector_norm(rows, 2, {-1})), per(rows), per(kurtosis), per(std::get<0>(rows.max(-1)))})
          .to(at::kDouble)
          .cpu();
  const auto a = all.accessor<double, 2>();
  for (int64_t i = 0; i < n; ++i) {
    const std::string key = name + suffix + (per_row ? "." + std::to_string(i) : std::string());
    metrics["activations/l2_norm/" + key] = a[0][i];
    metrics["activations/average/" + key] = a[1][i];
    metrics["activations/kurtosis/" + key] = a[2][i];
    metrics["activations/max/" + key] = a[3][i];
  }
}

bool observable(const at::Tensor& t) {
  return t.defined() && t.numel() > 0 && (t.is_floating_point() || t.is_complex());
}

// Stands in for one child for one forward: runs it, logs the statistics of its input and output.
class Observer : public nn::Layer {
 public:
  Observer(std::shared_ptr<nn::Layer> inner, std::string name, Logger& logger)
      : inner_(std::move(inner)), name_(std::move(name)), logger_(logger) {
    adopt_members_of(*inner_);
  }
  nn::Layer* stands_in_for() const override { return inner_.get(); }
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor out = inner_->forward(x);
    Metrics metrics;
    if (observable(x)) add_row_metrics(metrics, name_, "_input.0", x.unsqueeze(0), /*per_row=*/false);
    if (observable(out)) add_row_metrics(metrics, name_, "_output", out.dim() == 0 ? out.unsqueeze(0) : out, true);
    if (!metrics.empty()) logger_.log_metrics(metrics);
    return out;
  }

 private:
  std::shared_ptr<nn::Layer> inner_;
  std::string name_;
  Logger& logger_;
};

}  // namespace

struct ActivationMonitor::Observers {
  struct Swap {
    std::shared_ptr<nn::Composite> parent;  // kept alive, so putting the child back is safe at any time
    std::string child;
    std::shared_ptr<nn::Layer> original;
    std::string name;  // as named_modules() calls the child
  };
  std::vector<Swap> swaps;

  ~Observers() { restore(); }
  void restore() {
    for (auto& s : swaps) s.parent->replace(s.child, s.original);
    swaps.clear();
  }
};

ActivationMonitor::ActivationMonitor(ActivationMonitorOptions options) : options_(std::move(options)) {
  callbacks::detail::check_interval(options_.interval(), "ActivationMonitor");
}

ActivationMonitor::~ActivationMonitor() = default;

bool ActivationMonitor::due(const State& state) const {
  return callbacks::detail::due_once(state, options_.interval(), last_logged_);
}

void ActivationMonitor::before_forward(State& state, Logger& logger) {
  if (!due(state) || observers_ || !state.model) return;
  auto observers = std::make_unique<Observers>();
  for (const auto& item : state.model->named_modules("", /*include_self=*/false)) {
    auto parent = std::dynamic_pointer_cast<nn::Composite>(item.value());
    if (!parent) continue;
    for (const auto& child : parent->child_names()) {
      const std::string name = item.key() + "." + child;
      bool ignored = false;
      for (const auto& pattern : options_.ignore_module_types())
        ignored = ignored || name.find(pattern) != std::string::npos;
      if (!ignored) observers->swaps.push_back({parent, child, parent->child_ptr(child), name});
    }
  }
  if (observers->swaps.empty()) {
    bool any_composite = false;
    for (const auto& m : state.model->modules()) any_composite = any_composite || dynamic_cast<nn::Composite*>(m.get());
    if (any_composite) return;  // every layer is ignored
    throw std::invalid_argument(
        "ActivationMonitor: the model has no composer::nn::Composite layers to observe (torch::nn modules have no "
        "forward hooks in C++); build it from composer::nn layers (docs/model_surgery.md)");
  }
  for (auto& s : observers->swaps) s.parent->replace(s.child, std::make_shared<Observer>(s.original, s.name, logger));
  observers_ = std::move(observers);
}

void ActivationMonitor::after_forward(State& state, Logger&) {
  if (!observers_) return;
  observers_->restore();
  observers_.reset();
  last_logged_ = callbacks::detail::interval_count(state, options_.interval());
}

void ActivationMonitor::fit_end(State&, Logger&) { observers_.reset(); }

}  // namespace composer
