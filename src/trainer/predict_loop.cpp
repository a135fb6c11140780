#include "composer/trainer/predict_loop.h"

#include "composer/core/engine.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"
#include "trainer/detail/batch_agreement.h"
#include "trainer/detail/forward_inputs.h"
#include "trainer/detail/loader_swap.h"

#include <torch/torch.h>

#include <cmath>

namespace composer {

PredictLoop::PredictLoop(State& state, Engine& engine, Logger& logger)
    : state_(state), engine_(engine), logger_(logger), precision_(state.precision, state.device) {}

std::vector<at::Tensor> PredictLoop::run(DataLoader& loader, PredictLoopOptions options) {
  State& s = state_;
  detail::LoaderSwap swap(s);
  s.set_dataloader(&loader, "predict", options.subset_num_batches());
  s.predict_timestamp = Timestamp();
  at::NoGradGuard no_grad;
  s.model->eval();
  engine_.run_event(Event::PREDICT_START);
  loader.set_epoch(0);
  loader.reset();
  std::vector<at::Tensor> outputs;
  for (int64_t i = 0; !s.dataloader_len || i < *s.dataloader_len; ++i) {
    auto batch = loader.next();
    // A sharded model's forward is a collective: ranks stop together. Otherwise each rank predicts on all of its data.
    if (s.strategy->shards_state() ? !detail::every_rank_has_batch(*s.strategy, batch.has_value(), "predict", i)
                                   : !batch)
      break;
    s.batch = loader.transform_microbatch(loader.transform_batch(std::move(*batch)).to(s.device));
    engine_.run_event(Event::PREDICT_BATCH_START);
    engine_.run_event(Event::PREDICT_BEFORE_FORWARD);
    {
      auto scope = s.strategy->enter(dist::Phase::PREDICT_FORWARD);
      auto autocast = precision_.enter();
      s.outputs = s.model->forward(detail::forward_inputs(s.batch, *s.strategy));
    }
    engine_.run_event(Event::PREDICT_AFTER_FORWARD);
    outputs.push_back(s.outputs.to(at::kCPU));
    s.predict_timestamp = s.predict_timestamp.to_next_batch(std::llround(loader.num_samples_in_batch(s.batch)),
                                                            loader.num_tokens_in_batch(s.batch, TokenType::kTotal));
    engine_.run_event(Event::PREDICT_BATCH_END);
  }
  engine_.run_event(Event::PREDICT_END);
  return outputs;
}

}  // namespace composer
