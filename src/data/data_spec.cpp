#include "composer/data/data_spec.h"

#include <stdexcept>

namespace composer {

DataSpec::DataSpec(std::shared_ptr<DataLoader> loader, DataSpecOptions options)
    : loader_(std::move(loader)), options_(std::move(options)) {
  if (!loader_) throw std::invalid_argument("DataSpec: the dataloader is null; expected a DataLoader to wrap");
}

// Without a function of its own the wrapped loader answers, so a DataSpec over a loader with its own hooks keeps them.
Batch DataSpec::transform_batch(Batch batch) const {
  if (options_.batch_transforms()) return options_.batch_transforms()(std::move(batch));
  return loader_->transform_batch(std::move(batch));
}

Batch DataSpec::transform_microbatch(Batch batch) const {
  if (options_.microbatch_transforms()) return options_.microbatch_transforms()(std::move(batch));
  return loader_->transform_microbatch(std::move(batch));
}

std::vector<Batch> DataSpec::split_batch(const Batch& batch, double microbatch_size) const {
  if (!options_.split_batch()) return loader_->split_batch(batch, microbatch_size);
  std::vector<Batch> pieces = options_.split_batch()(batch, microbatch_size);
  if (pieces.empty()) throw std::invalid_argument("DataSpec split_batch returned no microbatch; expected at least one");
  return pieces;
}

double DataSpec::num_samples_in_batch(const Batch& batch) const {
  if (!options_.get_num_samples_in_batch()) return loader_->num_samples_in_batch(batch);
  const double n = options_.get_num_samples_in_batch()(batch);
  if (!(n >= 0)) {
    throw std::invalid_argument("DataSpec get_num_samples_in_batch returned " + std::to_string(n) +
                                "; expected a number of samples >= 0");
  }
  return n;
}

int64_t DataSpec::num_tokens_in_batch(const Batch& batch, TokenType type) const {
  if (!options_.get_num_tokens_in_batch()) return loader_->num_tokens_in_batch(batch, type);
  const int64_t n = options_.get_num_tokens_in_batch()(batch, type);
  if (n < 0) {
    throw std::invalid_argument("DataSpec get_num_tokens_in_batch returned " + std::to_string(n) +
                                "; expected a number of tokens >= 0");
  }
  return n;
}

}  // namespace composer
