// TrainStep: one optimisation step over state.batch, split into microbatches. The unit a hand-written loop drives:
//   State s; Logger logger(s); Engine engine(s, logger);  (model, optimizer, algorithms, callbacks set, INIT run;
//   s.set_dataloader(...) and s.max_duration set, which Composer's Engine requires for training events)
//   TrainStep step(s, engine, logger);
//   for (auto& batch : batches) { s.batch = batch; step.run(); s.timestamp = s.timestamp.to_next_batch(n); }
// examples/train_step_loop.cpp is a complete one. Inside, a plain step (src/trainer/detail/eager_step.h) and two
// units that wrap it: the automatic microbatch search (searching_step.h) and CUDA-graph replay (graphed_step.h).
#pragma once

#include "composer/trainer/microbatch_search.h"
#include "composer/trainer/precision_context.h"

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace composer {

class Engine;
class Logger;
struct State;
namespace detail {
class EagerStep;
class GraphedStep;
class SearchingStep;
}  // namespace detail

struct TrainStepOptions {
  /// Record the step (forward, loss, backward, optimizer step) as one CUDA graph after the warm-up steps and replay
  /// it for every later batch of the same shapes: one launch instead of hundreds of kernels. Needs CUDA, one
  /// process, fp32 or amp_bf16, one microbatch per batch, DecoupledSGDW or DecoupledAdamW, and no algorithm acting
  /// inside the step (TrainStep::cuda_graph_obstacles lists what stands in the way). docs/cuda_graph.md.
  TORCH_ARG(bool, cuda_graph) = false;
  /// Eager steps before recording (on a side stream, as CUDA graphs need): they create the optimizer's state and
  /// let cuDNN and cuBLAS pick their algorithms. At least 1.
  TORCH_ARG(int64_t, cuda_graph_warmup_steps) = 3;
  /// Composer's accumulate_train_batch_on_tokens: weight each microbatch's loss by its loss-generating tokens (labels
  /// other than -100; a batch without integer labels: input_ids' elements) over the mean across ranks of the batch's,
  /// instead of by samples, so that padding and masked tokens do not skew the gradient when microbatches or ranks
  /// hold different numbers of real tokens. The per-token mean of the whole global batch, as one microbatch computes.
  TORCH_ARG(bool, accumulate_train_batch_on_tokens) = false;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("cuda_graph", self.cuda_graph_, "record the train step as a CUDA graph and replay it (docs/cuda_graph.md)");
    visit("cuda_graph_warmup_steps", self.cuda_graph_warmup_steps_, "eager steps before the CUDA graph is recorded");
    visit("accumulate_train_batch_on_tokens", self.accumulate_train_batch_on_tokens_,
          "weight microbatches by loss-generating tokens (labels != -100), not samples");
  }
};

class TrainStep {
 public:
  /// Its settings are State's, because algorithms and automatic microbatching change them during a run:
  /// state.precision and state.device (read here: throws std::invalid_argument for amp_fp16 off CUDA),
  /// state.device_train_microbatch_size and state.strategy (read every step).
  /// With options.cuda_graph, throws std::invalid_argument listing cuda_graph_obstacles(state) when there are any.
  TrainStep(State& state, Engine& engine, Logger& logger, TrainStepOptions options = TrainStepOptions());
  ~TrainStep();

  /// What stops this run's step from being recorded as a CUDA graph, one line each (empty: nothing): a device
  /// other than CUDA, more than one process, amp_fp16 (its grad scaler decides on the host whether to step),
  /// automatic or several microbatches, an optimizer without supports_graph_capture(), an algorithm that acts on an
  /// event from BEFORE_TRAIN_BATCH to AFTER_TRAIN_BATCH (its host code would run once, at the recording), a loss
  /// backpropagated with create_graph.
  static std::vector<std::string> cuda_graph_obstacles(const State& state);

  /// Requires: state.model, state.optimizer, state.batch on state.device (state.scaler for amp_fp16), and
  /// state.dataloader and state.max_duration (the Engine refuses training events without them).
  /// Fires BEFORE_TRAIN_BATCH, per microbatch of state.device_train_microbatch_size samples (0 = the whole batch)
  /// BEFORE_FORWARD .. AFTER_BACKWARD, then AFTER_TRAIN_BATCH, inside the optimizer's closure, and steps the
  /// optimizer (through the grad scaler for amp_fp16). Each microbatch's loss is weighted by its samples over
  /// state.strategy's mean batch size, so the summed gradient equals the full-batch gradient (over every rank).
  /// Returns this rank's batch losses, detached: "total" and each named loss, the sample-weighted mean over
  /// microbatches. Logs trainer/device_train_microbatch_size (the samples per microbatch) every step, as Composer.
  ///
  /// With state.auto_microbatching (Composer's "auto") the size starts at the whole batch; when any rank runs out
  /// of memory inside the microbatches (is_out_of_memory), every rank drops what the attempt held (outputs, losses,
  /// gradients, the grad scaler's step record, the device's cached memory), puts back the generator states and
  /// train metrics as they were, halves state.device_train_microbatch_size and redoes the same batch from
  /// BEFORE_TRAIN_BATCH, so the step equals one run with the smaller size from the start. The ranks agree through
  /// MicrobatchSearch's collectives, and average gradients only after every rank is through its microbatches.
  /// Throws std::runtime_error when 1 sample does not fit, when memory runs out after the microbatches
  /// (gradient averaging, AFTER_TRAIN_BATCH, the optimizer step), where a smaller microbatch would not help, and
  /// when the size shrinks in a third batch (repeated shrinking: memory in use grows from batch to batch, and
  /// halving again would only postpone the failure); the message lists each batch's shrink.
  ///
  /// With options.cuda_graph: the first cuda_graph_warmup_steps steps run as above on a side stream; the next one
  /// records forward, loss, backward and the optimizer step into a CUDA graph, and it and every later batch of the
  /// same shapes copy the batch into the graph's inputs and replay it between BEFORE_TRAIN_BATCH and
  /// AFTER_TRAIN_BATCH (which so fires after the optimizer step). The events inside the step (BEFORE_FORWARD ..
  /// AFTER_BACKWARD) fire in eager steps only. A batch of other shapes (a last, smaller batch) runs eagerly.
  std::map<std::string, at::Tensor> run();

 private:
  State& state_;
  Logger& logger_;
  TrainStepOptions options_;
  PrecisionContext precision_;
  std::unique_ptr<detail::EagerStep> eager_;       // the plain step
  std::unique_ptr<detail::SearchingStep> search_;  // around it, with state.auto_microbatching
  std::unique_ptr<detail::GraphedStep> graph_;     // around it, with options_.cuda_graph
};

}  // namespace composer
