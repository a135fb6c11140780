// "TYPE:THRESHOLD" (e.g. "norm:0.05") from a worker's command line as a GradientClipping algorithm.
#pragma once

#include "composer/algorithms/registry.h"

#include <memory>
#include <string>

namespace composer::testing {

inline std::shared_ptr<Algorithm> gradient_clipping_from_spec(const std::string& spec) {
  const auto colon = spec.find(':');
  return algorithms::make_algorithm(
      "gradient_clipping", {{"clipping_type", spec.substr(0, colon)}, {"clipping_threshold", spec.substr(colon + 1)}});
}

}  // namespace composer::testing
