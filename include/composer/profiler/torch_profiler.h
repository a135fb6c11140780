// TorchProfiler: LibTorch's Kineto profiler over the schedule's active batches, its trace merged into the trace
// handlers' (Composer's TorchProfiler).
#pragma once

#include "composer/core/callback.h"

#include <memory>
#include <string>
#include <vector>

namespace composer {

class Profiler;

/// Made by Profiler::bind_to_state when a torch_prof_{record_shapes, profile_memory, with_stack, with_flops} option
/// is set. Kineto records CPU operators (and CUDA kernels when CUDA is available) from the BATCH_START of a window's
/// first ACTIVE batch to the BATCH_END of its ACTIVE_AND_SAVE batch; the trace is written to torch_prof_folder/
/// torch_prof_filename (Kineto's own file, its clock) and handed to the trace handlers shifted onto the wall clock,
/// so its operators nest inside the markers. Composer's torch.profiler also runs Kineto during warm-up and discards
/// it; this one starts at the first active batch.
class TorchProfiler : public Callback {
 public:
  explicit TorchProfiler(Profiler& profiler);
  ~TorchProfiler() override;
  void init(State& state, Logger& logger) override;
  void batch_start(State& state, Logger& logger) override;
  void batch_end(State& state, Logger& logger) override;
  void close(State& state, Logger& logger) override;

  /// The trace files written so far by this rank (those still kept).
  const std::vector<std::string>& saved_traces() const { return saved_; }

 private:
  void stop_recording();

  Profiler& profiler_;
  std::string folder_;
  bool recording_ = false;
  bool save_at_batch_end_ = false;
  std::vector<std::string> saved_;
};

}  // namespace composer
