#include "composer/nn/tensor_parallel_plan.h"

#include "utils/detail/text.h"

#include <stdexcept>

namespace composer::nn {

std::string to_string(ParallelStyle style) {
  switch (style) {
    case ParallelStyle::COLWISE:
      return "colwise";
    case ParallelStyle::ROWWISE:
      return "rowwise";
    case ParallelStyle::SEQUENCE:
      return "sequence";
    case ParallelStyle::SEQUENCE_START:
      return "sequence_start";
    case ParallelStyle::SEQUENCE_END:
      return "sequence_end";
  }
  return "unknown";
}

ParallelStyle parallel_style_from_string(const std::string& text, const std::string& key) {
  const std::string lower = composer::detail::to_lower(text);
  if (lower == "colwise" || lower == "colwiseparallel") return ParallelStyle::COLWISE;
  if (lower == "rowwise" || lower == "rowwiseparallel") return ParallelStyle::ROWWISE;
  if (lower == "sequence" || lower == "sequenceparallel") return ParallelStyle::SEQUENCE;
  if (lower == "sequence_start") return ParallelStyle::SEQUENCE_START;
  if (lower == "sequence_end") return ParallelStyle::SEQUENCE_END;
  throw std::invalid_argument(key +
                              " must be colwise, rowwise, sequence, sequence_start or sequence_end (ColwiseParallel, "
                              "RowwiseParallel, SequenceParallel), got '" +
                              text + "'");
}

}  // namespace composer::nn
