// Pieces shared by the algorithm implementations: random draws, repr strings, option checks, batch fields.
#pragma once

#include "composer/algorithms/module_surgery.h"
#include "composer/core/event.h"
#include "composer/core/precision.h"
#include "composer/core/serialization.h"
#include "composer/data/batch.h"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <array>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace composer::algorithms::detail {

/// Beta(a, b) from two Gamma draws (numpy.random.beta), on the default generator or `gen`.
double sample_beta(double a, double b, std::optional<at::Generator> gen = std::nullopt);
/// Dirichlet(alpha, ..., alpha) with `n` components.
std::vector<double> sample_dirichlet(double alpha, int64_t n, std::optional<at::Generator> gen = std::nullopt);
/// Uniform integer in [lo, hi) (numpy.random.randint(lo, hi)).
int64_t randint(int64_t lo, int64_t hi, std::optional<at::Generator> gen = std::nullopt);
/// Uniform real in [lo, hi).
double uniform(double lo, double hi, std::optional<at::Generator> gen = std::nullopt);
/// A random permutation of [0, n) on `device`.
at::Tensor randperm(int64_t n, const c10::Device& device);

/// A random cut_h x cut_w box in an h x w image, as Composer's CutMix and CutOut draw it: centre uniform in the image
/// (or, with uniform_sampling, in the image grown by half a box), sides [c - cut/2, c + cut/2) clipped to the image.
/// Returns {row1, col1, row2, col2}; the row centre is drawn first.
std::array<int64_t, 4> random_box(int64_t h, int64_t w, int64_t cut_h, int64_t cut_w, bool uniform_sampling);

/// Throws std::invalid_argument "<what>.<field> must be <expected>, got <value>".
[[noreturn]] void bad_option(const std::string& what, const std::string& field, const std::string& expected,
                             double value);
void require_range(const std::string& what, const std::string& field, double value, double lo, double hi,
                   bool lo_open = false, bool hi_open = false);

/// The field `key` of the state's batch, with an error naming the algorithm when it is missing.
at::Tensor& batch_field(Batch& batch, const BatchKey& key, const std::string& algorithm);
std::string key_string(const BatchKey& key);

/// Algorithm checkpoint state. `what` names the entry in errors ("EMA checkpoint state: ema_model.named_...").
/// A dict of name -> tensor; throws std::invalid_argument "<what> must map names to tensors" otherwise.
std::map<std::string, at::Tensor> tensor_map(const c10::IValue& value, const std::string& what);
c10::IValue tensor_dict(const std::map<std::string, at::Tensor>& tensors);
/// d[key] as a bool (false when absent) / an integer (`fallback` when absent), or an error naming what and key.
bool flag(const Dict& d, const std::string& key, const std::string& what);
int64_t integer(const Dict& d, const std::string& key, const std::string& what, int64_t fallback = 0);
/// The low-precision norm surgery (LowPrecisionLayerNorm, LowPrecisionGroupNorm): at amp_fp16 or amp_bf16 applies
/// `policies` to `model` (the optimizer, when given, trains the new norms); otherwise changes nothing. Either way
/// without an effect it says so on stderr naming `method` and `norm` (Composer's NoEffectWarning).
std::vector<Replacement> low_precision_surgery(torch::nn::Module& model, Precision precision,
                                               torch::optim::Optimizer* optimizer, const std::string& method,
                                               const std::string& norm, std::vector<ReplacementPolicy> policies);
/// For the surgery algorithms' apply_at: INIT, BEFORE_LOAD or AFTER_LOAD, else std::invalid_argument naming `what`.
void require_load_event(const std::string& what, Event event);

}  // namespace composer::algorithms::detail
