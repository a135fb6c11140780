// Pieces shared by the algorithm implementations: random draws, repr strings, option checks, batch fields.
#pragma once

#include "composer/data/batch.h"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <array>
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

}  // namespace composer::algorithms::detail
