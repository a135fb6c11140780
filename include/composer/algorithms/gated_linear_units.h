// GatedLinearUnits: feed-forward blocks become gated linear units (Composer's GatedLinearUnits and
// BERTGatedFFOutput), on our GPT-2 and BERT MLPs and on any user MLP of the same shape.
#pragma once

#include "composer/algorithms/module_surgery.h"
#include "composer/core/algorithm.h"
#include "composer/core/fields.h"
#include "composer/nn/layer.h"

#include <torch/arg.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace composer {
namespace nn {

/// wo(dropout(act(gated_layer(x)) * non_gated_layer(x))): gated_layer and non_gated_layer d -> d_ff (biases
/// optional), wo d_ff -> d with a bias; the dropout child only when p > 0.
class GatedMLP : public Composite {
 public:
  GatedMLP(int64_t d_embed, int64_t d_ff, std::shared_ptr<Layer> act, double dropout, bool gated_layer_bias = false,
           bool non_gated_layer_bias = false);
  at::Tensor forward(const at::Tensor& x) override;
};

}  // namespace nn

namespace functional {

enum class GLUActivation { GELU, RELU, SIGMOID };
std::string field_text(GLUActivation value);
void read_field(Hparams& hparams, const std::string& key, GLUActivation& value);

/// Replaces each MLP of `model` -- an nn::Sequential whose children are exactly Linear(d -> d_ff), a parameterless
/// activation, Linear(d_ff -> d) and optionally Dropout (our GPT-2 `mlp` and BERT `ffn`) -- by an nn::GatedMLP of the
/// same widths and dropout, with freshly initialised weights. The activation is `act_fn` or, when unset, the MLP's
/// own. The optimizer, when given, trains the new weights. Returns the replacements (none: a note on stderr).
std::vector<Replacement> apply_gated_linear_units(torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                                                  std::optional<GLUActivation> act_fn = std::nullopt,
                                                  bool gated_layer_bias = false, bool non_gated_layer_bias = false);

}  // namespace functional

namespace algorithms {

struct GatedLinearUnitsOptions {
  /// The gate's activation; None: each MLP's own.
  TORCH_ARG(std::optional<functional::GLUActivation>, act_fn);
  TORCH_ARG(bool, gated_layer_bias) = false;
  TORCH_ARG(bool, non_gated_layer_bias) = false;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("act_fn", self.act_fn_, "gate activation 'gelu', 'relu' or 'sigmoid'; None: the MLP's own");
    visit("gated_layer_bias", self.gated_layer_bias_, "a bias in the gated projection");
    visit("non_gated_layer_bias", self.non_gated_layer_bias_, "a bias in the non-gated projection");
  }
};

/// INIT: functional::apply_gated_linear_units on the model, the optimizer training the new weights. Required on
/// load.
class GatedLinearUnits : public Algorithm {
 public:
  explicit GatedLinearUnits(GatedLinearUnitsOptions options = GatedLinearUnitsOptions());
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  bool required_on_load() const override { return true; }
  std::string repr() const override;
  const GatedLinearUnitsOptions& options() const { return options_; }

 private:
  GatedLinearUnitsOptions options_;
};

}  // namespace algorithms
}  // namespace composer
