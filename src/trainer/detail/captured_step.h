// CapturedStep: a train step recorded once as a CUDA graph (at::cuda::CUDAGraph) and replayed for later batches of
// the same shapes (TrainStepOptions::cuda_graph). It owns the graph and its static input tensors; TrainStep says what
// is recorded.
#pragma once

#include "composer/data/batch.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace composer::detail {

class CapturedStep {
 public:
  CapturedStep();
  ~CapturedStep();
  CapturedStep(const CapturedStep&) = delete;
  CapturedStep& operator=(const CapturedStep&) = delete;

  bool recorded() const;
  /// Whether `batch` has the recorded batch's fields, shapes, dtypes and devices (so its data can be copied in).
  bool fits(const Batch& batch) const;
  /// Runs `fn` on a fresh side stream of `device` and waits for it: warm-up work before a recording must not run
  /// on the default stream.
  static void on_side_stream(const c10::Device& device, const std::function<void()>& fn);
  /// Copies `batch` into static tensors and records `body(static_batch)` into the graph on a side stream, with
  /// autocast's weight cache off (a cached cast would be recorded once and never redone). The recorded kernels
  /// do not run: replay() runs them. Throws std::runtime_error naming the cause when the recording fails (work
  /// that waits for the host, such as .item(), cannot be recorded).
  void record(const Batch& batch, const std::function<void(const Batch& static_batch)>& body);
  /// Copies `batch` (fits() true) into the static inputs and replays the graph on the current stream.
  void replay(const Batch& batch);

  // What the recorded body produced: tensors the graph writes again at every replay.
  at::Tensor outputs, loss;
  std::map<std::string, at::Tensor> losses, totals;
  std::vector<std::pair<at::Tensor, at::Tensor>> grads;  // (parameter, its gradient buffer)
  std::vector<bool> trainable;                           // requires_grad of the optimizer's parameters when recorded

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace composer::detail
