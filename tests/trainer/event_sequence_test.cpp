// The recorded event sequence of a run against Composer's _train_loop (spec section 1).
#include "support/test_support.h"

#include <gtest/gtest.h>

namespace composer {
namespace {

using E = Event;

void add_microbatch(std::vector<Event>& v) {
  for (E e :
       {E::BEFORE_FORWARD, E::AFTER_FORWARD, E::BEFORE_LOSS, E::AFTER_LOSS, E::BEFORE_BACKWARD, E::AFTER_BACKWARD})
    v.push_back(e);
}

void add_eval(std::vector<Event>& v, int batches) {
  v.push_back(E::EVAL_START);
  for (int b = 0; b < batches; ++b)
    for (E e : {E::EVAL_BATCH_START, E::EVAL_BEFORE_FORWARD, E::EVAL_AFTER_FORWARD, E::EVAL_BATCH_END}) v.push_back(e);
  v.push_back(E::EVAL_END);
}

// Composer's order for `epochs` epochs of `batches` batches, each split into `microbatches`, evaluating
// `eval_batches` batches after every epoch (eval_interval=1ep).
std::vector<Event> expected_fit(int epochs, int batches, int microbatches, int eval_batches) {
  std::vector<Event> v{E::INIT, E::BEFORE_LOAD, E::AFTER_LOAD, E::FIT_START, E::ITERATION_START};
  for (int ep = 0; ep < epochs; ++ep) {
    v.push_back(E::EPOCH_START);
    for (int b = 0; b < batches; ++b) {
      for (E e : {E::BEFORE_DATALOADER, E::AFTER_DATALOADER, E::BATCH_START, E::BEFORE_TRAIN_BATCH}) v.push_back(e);
      for (int m = 0; m < microbatches; ++m) add_microbatch(v);
      for (E e : {E::AFTER_TRAIN_BATCH, E::BATCH_END, E::BATCH_CHECKPOINT}) v.push_back(e);
    }
    v.push_back(E::BEFORE_DATALOADER);  // the next() that finds the loader exhausted
    v.push_back(E::EPOCH_END);
    v.push_back(E::EVAL_BEFORE_ALL);
    add_eval(v, eval_batches);
    v.push_back(E::EVAL_AFTER_ALL);
    v.push_back(E::EPOCH_CHECKPOINT);
  }
  v.push_back(E::FIT_END);  // the final evaluation already ran at this batch: not repeated
  return v;
}

TEST(EventSequenceTest, TwoEpochFitWithEvalAndMicrobatching) {
  auto recorder = std::make_shared<testing::RecordingCallback>();
  auto train = testing::make_loader(testing::make_blobs(24), 8);                 // 3 batches
  auto eval = testing::make_loader(testing::make_blobs(10, 8, 4, 5), 5, false);  // 2 batches
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(train)
                      .eval_dataloader(eval)
                      .max_duration("2ep")
                      .device_train_microbatch_size(4)  // 2 microbatches per batch
                      .callbacks({recorder}));
  trainer.fit();
  EXPECT_EQ(testing::names(recorder->events), testing::names(expected_fit(2, 3, 2, 2)));
}

TEST(EventSequenceTest, StoppingMidEpochSkipsEpochEnd) {
  auto recorder = std::make_shared<testing::RecordingCallback>();
  auto train = testing::make_loader(testing::make_blobs(24), 8);
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(train)
                      .max_duration("2ba")
                      .callbacks({recorder}));
  trainer.fit();
  std::vector<Event> v{E::INIT, E::BEFORE_LOAD, E::AFTER_LOAD, E::FIT_START, E::ITERATION_START, E::EPOCH_START};
  for (int b = 0; b < 2; ++b) {
    for (E e : {E::BEFORE_DATALOADER, E::AFTER_DATALOADER, E::BATCH_START, E::BEFORE_TRAIN_BATCH}) v.push_back(e);
    add_microbatch(v);
    for (E e : {E::AFTER_TRAIN_BATCH, E::BATCH_END, E::BATCH_CHECKPOINT}) v.push_back(e);
  }
  v.push_back(E::FIT_END);
  EXPECT_EQ(testing::names(recorder->events), testing::names(v));
  EXPECT_EQ(trainer.state().timestamp.epoch, 0);
  EXPECT_EQ(trainer.state().timestamp.batch, 2);
}

TEST(EventSequenceTest, BatchCountEndingOnEpochBoundaryStillEndsTheEpoch) {
  auto recorder = std::make_shared<testing::RecordingCallback>();
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(24), 8))
                      .max_duration("3ba")
                      .callbacks({recorder}));
  trainer.fit();
  const auto& ev = recorder->events;
  EXPECT_EQ(std::count(ev.begin(), ev.end(), E::EPOCH_END), 1);
  EXPECT_EQ(std::count(ev.begin(), ev.end(), E::BEFORE_DATALOADER), 3);  // stopped before asking for more
  EXPECT_EQ(trainer.state().timestamp.epoch, 1);
}

TEST(EventSequenceTest, FinalEvalRunsAfterFitEndWhenNotYetDone) {
  auto recorder = std::make_shared<testing::RecordingCallback>();
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(24), 8))
                      .eval_dataloader(testing::make_loader(testing::make_blobs(5), 5, false))
                      .max_duration("2ba")
                      .callbacks({recorder}));
  trainer.fit();
  const auto& ev = recorder->events;
  const auto fit_end = std::find(ev.begin(), ev.end(), E::FIT_END);
  ASSERT_NE(fit_end, ev.end());
  EXPECT_EQ(
      std::vector<Event>(fit_end, ev.end()),
      (std::vector<Event>{E::FIT_END, E::EVAL_BEFORE_ALL, E::EVAL_START, E::EVAL_BATCH_START, E::EVAL_BEFORE_FORWARD,
                          E::EVAL_AFTER_FORWARD, E::EVAL_BATCH_END, E::EVAL_END, E::EVAL_AFTER_ALL}));
}

TEST(EventSequenceTest, StandaloneEvalAndPredict) {
  auto recorder = std::make_shared<testing::RecordingCallback>();
  auto eval = testing::make_loader(testing::make_blobs(5), 5, false);
  Trainer trainer(testing::quiet_options(testing::make_classifier()).eval_dataloader(eval).callbacks({recorder}));
  recorder->events.clear();
  trainer.eval();
  EXPECT_EQ(testing::names(recorder->events),
            testing::names({E::EVAL_STANDALONE_START, E::EVAL_START, E::EVAL_BATCH_START, E::EVAL_BEFORE_FORWARD,
                            E::EVAL_AFTER_FORWARD, E::EVAL_BATCH_END, E::EVAL_END, E::EVAL_STANDALONE_END}));
  recorder->events.clear();
  auto outputs = trainer.predict(*eval);
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].sizes(), (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(testing::names(recorder->events),
            testing::names({E::PREDICT_START, E::PREDICT_BATCH_START, E::PREDICT_BEFORE_FORWARD,
                            E::PREDICT_AFTER_FORWARD, E::PREDICT_BATCH_END, E::PREDICT_END}));
}

}  // namespace
}  // namespace composer
