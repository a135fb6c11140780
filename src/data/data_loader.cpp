#include "composer/data/data_loader.h"

#include <ATen/ATen.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace composer {

std::vector<Batch> default_split_batch(const Batch& batch, double microbatch_size) {
  if (!(microbatch_size > 0) || !std::isfinite(microbatch_size)) {
    std::ostringstream what;
    what << "microbatch size must be a positive number of samples, got " << microbatch_size;
    throw std::invalid_argument(what.str());
  }
  if (microbatch_size != std::floor(microbatch_size)) {
    std::ostringstream what;
    what << "microbatch size " << microbatch_size
         << " is a fraction of a sample: the default split_batch splits whole samples only; give the loader a "
            "split_batch (DataSpec) that can split one, or use a whole number";
    throw std::invalid_argument(what.str());
  }
  return batch.split(static_cast<int64_t>(microbatch_size));
}

int64_t default_num_tokens_in_batch(const Batch& batch, TokenType type) {
  if (type == TokenType::kLossGenerating && batch.has("labels")) {
    const at::Tensor& labels = batch.at(std::string("labels"));
    if (!at::isFloatingType(labels.scalar_type())) return labels.ne(-100).sum().item<int64_t>();
  }
  return batch.num_tokens();
}

}  // namespace composer
