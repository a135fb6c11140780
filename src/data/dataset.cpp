#include "composer/data/dataset.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace composer {

TensorDataset::TensorDataset(Batch data) : data_(std::move(data)), size_(data_.num_samples()) {}

Batch TensorDataset::get_batch(const at::Tensor& indices) const {
  std::vector<std::pair<std::string, at::Tensor>> fields;
  for (const auto& [k, t] : data_.fields()) fields.emplace_back(k, t.index_select(0, indices));
  return Batch(std::move(fields));
}

TensorDataset TensorDataset::head(int64_t n) const {
  if (n <= 0 || n > size_) {
    throw std::invalid_argument("TensorDataset.head(" + std::to_string(n) + "): must be in [1, " +
                                std::to_string(size_) + "]");
  }
  std::vector<std::pair<std::string, at::Tensor>> fields;
  for (const auto& [k, t] : data_.fields()) fields.emplace_back(k, t.narrow(0, 0, n));
  return TensorDataset(Batch(std::move(fields)));
}

}  // namespace composer
