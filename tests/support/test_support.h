// Shared test fixtures: tiny models, synthetic data, a callback that records the event sequence.
#pragma once

#include "composer/composer.h"

#include <torch/torch.h>

#include <string>
#include <vector>

namespace composer::testing {

/// An MLP in->hidden->out with ReLU, initialised from `seed`.
inline torch::nn::Sequential make_mlp(int64_t in, int64_t hidden, int64_t out, uint64_t seed = 0,
                                      at::ScalarType dtype = at::kFloat) {
  torch::manual_seed(seed);
  torch::nn::Sequential seq(torch::nn::Linear(in, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, out));
  seq->to(dtype);
  return seq;
}

/// A classifier over `make_mlp`.
inline std::shared_ptr<ComposerClassifier> make_classifier(int64_t in = 8, int64_t hidden = 16, int64_t classes = 4,
                                                           uint64_t seed = 0, at::ScalarType dtype = at::kFloat) {
  return ComposerClassifier::wrap(make_mlp(in, hidden, classes, seed, dtype));
}

/// A learnable synthetic problem: x ~ N(0, 1), y = argmax(x @ W) for a fixed random W.
inline Batch make_blobs(int64_t n, int64_t dim = 8, int64_t classes = 4, uint64_t seed = 1,
                        at::ScalarType dtype = at::kFloat) {
  auto gen = at::detail::createCPUGenerator(seed);
  at::Tensor x = at::randn({n, dim}, gen, at::TensorOptions().dtype(at::kFloat));
  at::Tensor w = at::randn({dim, classes}, gen, at::TensorOptions().dtype(at::kFloat));
  at::Tensor y = x.matmul(w).argmax(1);
  return Batch(x.to(dtype), y);
}

inline std::shared_ptr<TensorDataLoader> make_loader(const Batch& data, int64_t batch_size, bool shuffle = true,
                                                     uint64_t seed = 7) {
  return std::make_shared<TensorDataLoader>(data, TensorDataLoaderOptions(batch_size).shuffle(shuffle).seed(seed));
}

/// Records every event it sees, in order.
class RecordingCallback : public Callback {
 public:
  void run_event(Event event, State& state, Logger& logger) override {
    events.push_back(event);
    Callback::run_event(event, state, logger);
  }
  std::vector<Event> events;
};

/// Calls stop_training() at the end of batch `batch` (Composer's state.stop_training(), e.g. from a callback).
class StopAtBatch : public Callback {
 public:
  explicit StopAtBatch(int64_t batch) : batch_(batch) {}
  void batch_end(State& state, Logger&) override {
    if (state.timestamp.batch == batch_) state.stop_training();
  }

 private:
  int64_t batch_;
};

/// Names for readable assertion messages.
inline std::vector<std::string> names(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (Event e : events) out.push_back(event_name(e));
  return out;
}

/// Options for a quiet CPU trainer (no progress bar).
inline TrainerOptions quiet_options(std::shared_ptr<ComposerModel> model) {
  return TrainerOptions(std::move(model)).progress_bar(false).seed(42).device("cpu");
}

}  // namespace composer::testing
