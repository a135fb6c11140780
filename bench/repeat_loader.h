// RepeatLoader: the same device-resident batch `length` times, so that a benchmark measures the training step, not
// data loading or host-to-device copies (bench/channels_last, bench/gpu_suite).
#pragma once

#include "composer/composer.h"

#include <optional>
#include <utility>

namespace composer::bench {

class RepeatLoader : public DataLoader {
 public:
  RepeatLoader(Batch batch, int64_t length) : batch_(std::move(batch)), length_(length) {}
  std::optional<int64_t> length() const override { return length_; }
  int64_t batch_size() const override { return batch_.num_samples(); }
  void set_epoch(int64_t) override {}
  void reset() override { served_ = 0; }
  std::optional<Batch> next() override {
    if (served_ >= length_) return std::nullopt;
    ++served_;
    return batch_;
  }

 private:
  Batch batch_;
  int64_t length_, served_ = 0;
};

}  // namespace composer::bench
