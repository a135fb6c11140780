// Automatic microbatching (Composer's device_train_microbatch_size / device_eval_microbatch_size = "auto"): what
// counts as running out of memory, the cross-rank agreement that keeps every rank on the same microbatch size, and
// the halving rule. TrainStep and EvalLoop drive it; a hand-written loop can too:
//   MicrobatchSearch search("train", state.device);
//   for (;;) {
//     bool oom = false;
//     try { ...microbatches, search.check_in_attempt() after each... } catch (const std::exception& e) {
//       if (!is_out_of_memory(e)) throw;
//       oom = true;
//     }
//     if (!search.any_out_of_memory(oom)) break;
//     size = MicrobatchSearch::halve(size, "train");   // then release what the attempt held and redo the batch
//   }
#pragma once

#include "composer/core/state.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace composer {

/// Whether `e` reports an allocation failure: c10::OutOfMemoryError (CUDA's caching allocator), the CPU allocator's
/// failure (LibTorch raises it as a plain c10::Error naming DefaultCPUAllocator), std::bad_alloc, or
/// OutOfMemoryOnAnotherRank.
bool is_out_of_memory(const std::exception& e);

/// Thrown by MicrobatchSearch::check_in_attempt on a rank whose attempt was going well when another rank ran out of
/// memory in the same attempt: every rank then retries with the smaller size.
class OutOfMemoryOnAnotherRank : public std::runtime_error {
 public:
  OutOfMemoryOnAnotherRank();
};

class MicrobatchSearch {
 public:
  /// `loop`: "train" or an evaluator's label, for messages. `device`: where the flag tensor of the collectives
  /// lives (NCCL needs CUDA tensors).
  MicrobatchSearch(std::string loop, c10::Device device);

  /// Inside an attempt, before any other collective the attempt makes (after each microbatch): one all-reduce.
  /// Throws OutOfMemoryOnAnotherRank when a rank reported running out of memory in this attempt. With one
  /// process it does nothing.
  void check_in_attempt() const;
  /// After an attempt, finished (`out_of_memory_here` false) or abandoned on an out-of-memory error: all-reduces
  /// until no rank is still inside the attempt (each of their check_in_attempt calls pairs with one round here).
  /// Returns whether any rank ran out of memory: then every rank retries the batch.
  bool any_out_of_memory(bool out_of_memory_here) const;
  /// The next size to try, as Composer: max(size / 2, 1). Throws std::runtime_error naming the loop when `size` is
  /// already 1 (not even one sample fits).
  static int64_t halve(int64_t size, const std::string& loop);
  /// The microbatch size a batch of `batch_samples` ran with: `size` capped at the batch, the whole batch when
  /// `size` is unset (0 or below). What trainer/device_*_microbatch_size logs.
  static int64_t used_size(int64_t size, int64_t batch_samples) {
    return size > 0 ? std::min(size, batch_samples) : batch_samples;
  }

 private:
  std::string loop_;
  c10::Device device_;
};

/// The metrics' states before an attempt, put back by restore() when the batch is redone, so that a batch counts
/// once.
class MetricStates {
 public:
  explicit MetricStates(const MetricMap& metrics);
  void restore() const;

 private:
  struct Saved {
    Metric* metric;
    at::Tensor state, rows;
  };
  std::vector<Saved> states_;
};

/// Returns what the device's caching allocator holds but does not use to the device (CUDA's empty_cache); nothing
/// on the CPU, whose allocator keeps no cache.
void release_cached_memory(const c10::Device& device);

}  // namespace composer
