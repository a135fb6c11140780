#include "composer/algorithms/gated_linear_units.h"

#include "composer/core/fields.h"
#include "composer/core/hparams.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"
#include "composer/nn/layers.h"

#include <ATen/ATen.h>

#include <iostream>

namespace composer {
namespace nn {

GatedMLP::GatedMLP(int64_t d_embed, int64_t d_ff, std::shared_ptr<Layer> act, double dropout, bool gated_layer_bias,
                   bool non_gated_layer_bias) {
  add("gated_layer", std::make_shared<Linear>(LinearOptions(d_embed, d_ff).bias(gated_layer_bias)));
  add("non_gated_layer", std::make_shared<Linear>(LinearOptions(d_embed, d_ff).bias(non_gated_layer_bias)));
  add("act", std::move(act));
  add("wo", std::make_shared<Linear>(d_ff, d_embed));
  if (dropout > 0) add("dropout", std::make_shared<Dropout>(dropout));
}

at::Tensor GatedMLP::forward(const at::Tensor& x) {
  at::Tensor h = child("act").forward(child("gated_layer").forward(x)) * child("non_gated_layer").forward(x);
  if (has("dropout")) h = child("dropout").forward(h);
  return child("wo").forward(h);
}

}  // namespace nn

namespace functional {
namespace {

const std::vector<std::pair<std::string, GLUActivation>> kActivations{
    {"gelu", GLUActivation::GELU}, {"relu", GLUActivation::RELU}, {"sigmoid", GLUActivation::SIGMOID}};

std::shared_ptr<nn::Layer> make_activation(GLUActivation a) {
  switch (a) {
    case GLUActivation::GELU:
      return std::make_shared<nn::GELU>();
    case GLUActivation::RELU:
      return std::make_shared<nn::ReLU>();
    case GLUActivation::SIGMOID:
      return std::make_shared<nn::Sigmoid>();
  }
  return nullptr;
}

// The MLP shape: Linear(d -> f), a parameterless activation, Linear(f -> d), optionally Dropout.
struct MLPShape {
  int64_t d = 0, f = 0;
  std::shared_ptr<nn::Layer> act;
  double dropout = 0;
};

std::optional<MLPShape> mlp_shape(const nn::Sequential& seq) {
  const auto& names = seq.child_names();
  if (names.size() != 3 && names.size() != 4) return std::nullopt;
  const auto* up = dynamic_cast<const nn::Linear*>(&seq.child(names[0]));
  const auto act = seq.child_ptr(names[1]);
  const auto* down = dynamic_cast<const nn::Linear*>(&seq.child(names[2]));
  if (!up || !down || !act || !act->parameters().empty() || dynamic_cast<const nn::Linear*>(act.get()) ||
      dynamic_cast<const nn::Dropout*>(act.get()))
    return std::nullopt;
  if (down->in_features != up->out_features || down->out_features != up->in_features) return std::nullopt;
  MLPShape shape{up->in_features, up->out_features, act, 0.0};
  if (names.size() == 4) {
    const auto* drop = dynamic_cast<const nn::Dropout*>(&seq.child(names[3]));
    if (!drop) return std::nullopt;
    shape.dropout = drop->p;
  }
  return shape;
}

}  // namespace

std::string field_text(GLUActivation value) { return choice_text(value, kActivations); }
void read_field(Hparams& hparams, const std::string& key, GLUActivation& value) {
  read_choice(hparams, key, value, kActivations);
}

std::vector<Replacement> apply_gated_linear_units(torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                                                  std::optional<GLUActivation> act_fn, bool gated_layer_bias,
                                                  bool non_gated_layer_bias) {
  std::vector<ReplacementPolicy> policies{
      policy_for<nn::Sequential>([&](nn::Sequential& seq, int64_t) -> std::shared_ptr<nn::Layer> {
        const auto shape = mlp_shape(seq);
        if (!shape) return nullptr;
        auto act = act_fn ? make_activation(*act_fn) : shape->act;
        auto glu = std::make_shared<nn::GatedMLP>(shape->d, shape->f, std::move(act), shape->dropout, gated_layer_bias,
                                                  non_gated_layer_bias);
        return glu;
      })};
  SurgeryOptions options;
  options.optimizer = optimizer;
  auto done = replace_module_classes(model, policies, options);
  if (done.empty())
    std::cerr << "composer: GatedLinearUnits found no MLP (Linear, activation, Linear[, Dropout]) to replace\n";
  return done;
}

}  // namespace functional

namespace algorithms {

GatedLinearUnits::GatedLinearUnits(GatedLinearUnitsOptions options) : options_(options) {}

bool GatedLinearUnits::match(Event event, const State&) { return event == Event::INIT; }

std::optional<int> GatedLinearUnits::apply(Event, State& state, Logger&) {
  if (state.model) {
    functional::apply_gated_linear_units(*state.model, state.optimizer.get(), options_.act_fn(),
                                         options_.gated_layer_bias(), options_.non_gated_layer_bias());
  }
  return std::nullopt;
}

std::string GatedLinearUnits::repr() const { return options_repr("GatedLinearUnits", options_); }

}  // namespace algorithms
}  // namespace composer
