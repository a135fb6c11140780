#include "composer/data/tensor_data_loader.h"

#include "composer/data/sampler.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace composer {

void TensorDataLoaderOptions::validate() const {
  if (batch_size_ <= 0)
    throw std::invalid_argument("TensorDataLoaderOptions.batch_size must be > 0, got " + std::to_string(batch_size_));
  if (num_replicas_ <= 0)
    throw std::invalid_argument("TensorDataLoaderOptions.num_replicas must be > 0, got " +
                                std::to_string(num_replicas_));
  if (rank_ < 0 || rank_ >= num_replicas_) {
    throw std::invalid_argument("TensorDataLoaderOptions.rank must be in [0, " + std::to_string(num_replicas_) +
                                "), got " + std::to_string(rank_));
  }
}

TensorDataLoader::TensorDataLoader(Batch data, TensorDataLoaderOptions options)
    : data_(std::move(data)), options_(options) {
  options_.validate();
  if (data_.num_samples() == 0) throw std::invalid_argument("TensorDataLoader: the data set is empty");
  reset();
}

int64_t TensorDataLoader::num_samples() const {
  const int64_t n = data_.num_samples();
  const int64_t r = options_.num_replicas();
  return (n + r - 1) / r;  // padded by wrapping, as DistributedSampler(drop_last=False)
}

std::optional<int64_t> TensorDataLoader::length() const {
  const int64_t n = num_samples(), b = options_.batch_size();
  return options_.drop_last() ? n / b : (n + b - 1) / b;
}

void TensorDataLoader::reset() {
  indices_ = sample_indices(data_.num_samples(), epoch_,
                            SamplerOptions()
                                .shuffle(options_.shuffle())
                                .seed(options_.seed())
                                .num_replicas(options_.num_replicas())
                                .rank(options_.rank()));
  cursor_ = 0;
}

std::optional<Batch> TensorDataLoader::next() {
  const int64_t n = indices_.size(0), b = options_.batch_size();
  if (cursor_ >= n || (options_.drop_last() && cursor_ + b > n)) return std::nullopt;
  const int64_t len = std::min(b, n - cursor_);
  const at::Tensor idx = indices_.narrow(0, cursor_, len);
  cursor_ += len;
  std::vector<std::pair<std::string, at::Tensor>> fields;
  for (const auto& [k, t] : data_.fields()) fields.emplace_back(k, t.index_select(0, idx));
  return Batch(std::move(fields));
}

void TensorDataLoader::skip(int64_t n) { cursor_ = std::min(indices_.size(0), cursor_ + n * options_.batch_size()); }

}  // namespace composer
