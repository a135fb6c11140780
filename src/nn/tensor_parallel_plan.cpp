#include "composer/nn/tensor_parallel_plan.h"

#include "utils/detail/text.h"

#include <stdexcept>

namespace composer::nn {

std::string to_string(ParallelStyle style) { return style == ParallelStyle::COLWISE ? "colwise" : "rowwise"; }

ParallelStyle parallel_style_from_string(const std::string& text, const std::string& key) {
  const std::string lower = composer::detail::to_lower(text);
  if (lower == "colwise" || lower == "colwiseparallel") return ParallelStyle::COLWISE;
  if (lower == "rowwise" || lower == "rowwiseparallel") return ParallelStyle::ROWWISE;
  throw std::invalid_argument(key + " must be colwise or rowwise (ColwiseParallel, RowwiseParallel), got '" + text +
                              "'");
}

}  // namespace composer::nn
