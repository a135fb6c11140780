#include "composer/core/event.h"

#include <gtest/gtest.h>

namespace composer {
namespace {

TEST(EventTest, FortyEventsInComposerOrder) {
  const std::vector<std::string> expected{"INIT",
                                          "BEFORE_LOAD",
                                          "AFTER_LOAD",
                                          "FIT_START",
                                          "ITERATION_START",
                                          "EPOCH_START",
                                          "BEFORE_DATALOADER",
                                          "AFTER_DATALOADER",
                                          "BATCH_START",
                                          "BEFORE_TRAIN_BATCH",
                                          "BEFORE_FORWARD",
                                          "AFTER_FORWARD",
                                          "BEFORE_LOSS",
                                          "AFTER_LOSS",
                                          "BEFORE_BACKWARD",
                                          "AFTER_BACKWARD",
                                          "AFTER_TRAIN_BATCH",
                                          "BATCH_END",
                                          "BATCH_CHECKPOINT",
                                          "EPOCH_END",
                                          "EPOCH_CHECKPOINT",
                                          "ITERATION_END",
                                          "ITERATION_CHECKPOINT",
                                          "FIT_END",
                                          "EVAL_BEFORE_ALL",
                                          "EVAL_START",
                                          "EVAL_BATCH_START",
                                          "EVAL_BEFORE_FORWARD",
                                          "EVAL_AFTER_FORWARD",
                                          "EVAL_BATCH_END",
                                          "EVAL_END",
                                          "EVAL_AFTER_ALL",
                                          "EVAL_STANDALONE_START",
                                          "EVAL_STANDALONE_END",
                                          "PREDICT_START",
                                          "PREDICT_BATCH_START",
                                          "PREDICT_BEFORE_FORWARD",
                                          "PREDICT_AFTER_FORWARD",
                                          "PREDICT_BATCH_END",
                                          "PREDICT_END"};
  ASSERT_EQ(all_events().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(event_name(all_events()[i]), expected[i]);
}

TEST(EventTest, ValuesAreLowerCaseNames) {
  EXPECT_STREQ(event_value(Event::BEFORE_FORWARD), "before_forward");
  EXPECT_STREQ(event_value(Event::EVAL_STANDALONE_END), "eval_standalone_end");
  EXPECT_EQ(parse_event("batch_end"), Event::BATCH_END);
  EXPECT_EQ(parse_event("FIT_START"), Event::FIT_START);
  EXPECT_EQ(parse_event("Batch_End"), Event::BATCH_END);  // case-insensitive, as Composer's StringEnum
  EXPECT_EQ(parse_event("fit_START"), Event::FIT_START);
  EXPECT_THROW(parse_event("batch_ending"), std::invalid_argument);
}

TEST(EventTest, BeforeAfterPredicates) {
  EXPECT_TRUE(is_before_event(Event::BEFORE_FORWARD));
  EXPECT_TRUE(is_before_event(Event::FIT_START));
  EXPECT_TRUE(is_before_event(Event::EVAL_BEFORE_ALL));
  EXPECT_TRUE(is_after_event(Event::AFTER_LOSS));
  EXPECT_TRUE(is_after_event(Event::BATCH_END));
  EXPECT_TRUE(is_after_event(Event::EVAL_AFTER_FORWARD));
  for (Event e : {Event::INIT, Event::BATCH_CHECKPOINT, Event::EPOCH_CHECKPOINT, Event::ITERATION_CHECKPOINT}) {
    EXPECT_FALSE(is_before_event(e)) << event_name(e);
    EXPECT_FALSE(is_after_event(e)) << event_name(e);
  }
}

TEST(EventTest, CanonicalNames) {
  EXPECT_EQ(canonical_name(Event::BEFORE_FORWARD), "forward");
  EXPECT_EQ(canonical_name(Event::AFTER_FORWARD), "forward");
  EXPECT_EQ(canonical_name(Event::BATCH_START), "batch");
  EXPECT_EQ(canonical_name(Event::EVAL_BEFORE_FORWARD), "eval_forward");
  EXPECT_EQ(canonical_name(Event::EVAL_STANDALONE_START), "eval_standalone");
  EXPECT_EQ(canonical_name(Event::BEFORE_DATALOADER), "dataloader");
}

TEST(EventTest, EvalAndPredictPrefixes) {
  EXPECT_TRUE(is_eval_event(Event::EVAL_BATCH_END));
  EXPECT_FALSE(is_eval_event(Event::BATCH_END));
  EXPECT_TRUE(is_predict_event(Event::PREDICT_END));
  EXPECT_FALSE(is_predict_event(Event::FIT_END));
}

}  // namespace
}  // namespace composer
