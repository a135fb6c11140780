#include "composer/metrics/language.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace composer {

LanguageCrossEntropy::LanguageCrossEntropy(int64_t ignore_index) : Metric(2), ignore_index_(ignore_index) {}

void LanguageCrossEntropy::update(const at::Tensor& logits, const at::Tensor& target) {
  const at::Tensor flat_logits = logits.reshape({-1, logits.size(-1)}).to(at::kFloat);
  const at::Tensor flat_target = target.reshape({-1});
  const at::Tensor summed = at::cross_entropy_loss(flat_logits, flat_target, {}, at::Reduction::Sum, ignore_index_);
  update_from_sum(summed, flat_target.ne(ignore_index_).sum());
}

void LanguageCrossEntropy::update_from_sum(const at::Tensor& summed, const at::Tensor& tokens) {
  accumulate(at::stack({summed.detach().to(at::kDouble), tokens.to(at::kDouble)}));
}

double LanguageCrossEntropy::compute() const { return mean_of_state(); }

double LanguagePerplexity::compute() const { return std::exp(LanguageCrossEntropy::compute()); }

MaskedAccuracy::MaskedAccuracy(int64_t ignore_index) : Metric(2), ignore_index_(ignore_index) {}

void MaskedAccuracy::update(const at::Tensor& logits, const at::Tensor& target) {
  const at::Tensor pred = logits.argmax(-1).reshape({-1});
  const at::Tensor t = target.reshape({-1});
  const at::Tensor mask = t.ne(ignore_index_);
  const at::Tensor correct = pred.eq(t).logical_and(mask).sum();
  accumulate(at::stack({correct.to(at::kDouble), mask.sum().to(at::kDouble)}));
}

double MaskedAccuracy::compute() const { return mean_of_state(); }

}  // namespace composer
