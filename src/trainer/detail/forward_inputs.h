// The batch a model's forward sees under a strategy that casts its inputs (FSDP's mixed_precision param_dtype, as
// torch FSDP casts the root module's floating forward arguments); the loss and the metrics see the batch as loaded.
#pragma once

#include "composer/data/batch.h"
#include "composer/dist/strategy.h"

#include <string>
#include <utility>
#include <vector>

namespace composer::detail {

inline Batch forward_inputs(const Batch& batch, const dist::Strategy& strategy) {
  const auto dtype = strategy.forward_input_dtype();
  if (!dtype) return batch;
  bool cast = false;
  std::vector<std::pair<std::string, at::Tensor>> fields;
  for (const auto& [key, value] : batch.fields()) {
    if (value.defined() && at::isFloatingType(value.scalar_type()) && value.scalar_type() != *dtype) {
      fields.emplace_back(key, value.to(*dtype));
      cast = true;
    } else {
      fields.emplace_back(key, value);
    }
  }
  return cast ? Batch(std::move(fields)) : batch;
}

}  // namespace composer::detail
