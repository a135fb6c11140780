// Event: the 40 points of a run where algorithms and callbacks act, in Composer's declaration order.
#pragma once

#include <array>
#include <string>

namespace composer {

// X(ENUM_NAME, callback_method_name): one line per event, in Composer's order. Drives the enum, the names and
// the per-event virtual methods of Callback.
#define COMPOSER_FOR_EACH_EVENT(X)                  \
  X(INIT, init)                                     \
  X(BEFORE_LOAD, before_load)                       \
  X(AFTER_LOAD, after_load)                         \
  X(FIT_START, fit_start)                           \
  X(ITERATION_START, iteration_start)               \
  X(EPOCH_START, epoch_start)                       \
  X(BEFORE_DATALOADER, before_dataloader)           \
  X(AFTER_DATALOADER, after_dataloader)             \
  X(BATCH_START, batch_start)                       \
  X(BEFORE_TRAIN_BATCH, before_train_batch)         \
  X(BEFORE_FORWARD, before_forward)                 \
  X(AFTER_FORWARD, after_forward)                   \
  X(BEFORE_LOSS, before_loss)                       \
  X(AFTER_LOSS, after_loss)                         \
  X(BEFORE_BACKWARD, before_backward)               \
  X(AFTER_BACKWARD, after_backward)                 \
  X(AFTER_TRAIN_BATCH, after_train_batch)           \
  X(BATCH_END, batch_end)                           \
  X(BATCH_CHECKPOINT, batch_checkpoint)             \
  X(EPOCH_END, epoch_end)                           \
  X(EPOCH_CHECKPOINT, epoch_checkpoint)             \
  X(ITERATION_END, iteration_end)                   \
  X(ITERATION_CHECKPOINT, iteration_checkpoint)     \
  X(FIT_END, fit_end)                               \
  X(EVAL_BEFORE_ALL, eval_before_all)               \
  X(EVAL_START, eval_start)                         \
  X(EVAL_BATCH_START, eval_batch_start)             \
  X(EVAL_BEFORE_FORWARD, eval_before_forward)       \
  X(EVAL_AFTER_FORWARD, eval_after_forward)         \
  X(EVAL_BATCH_END, eval_batch_end)                 \
  X(EVAL_END, eval_end)                             \
  X(EVAL_AFTER_ALL, eval_after_all)                 \
  X(EVAL_STANDALONE_START, eval_standalone_start)   \
  X(EVAL_STANDALONE_END, eval_standalone_end)       \
  X(PREDICT_START, predict_start)                   \
  X(PREDICT_BATCH_START, predict_batch_start)       \
  X(PREDICT_BEFORE_FORWARD, predict_before_forward) \
  X(PREDICT_AFTER_FORWARD, predict_after_forward)   \
  X(PREDICT_BATCH_END, predict_batch_end)           \
  X(PREDICT_END, predict_end)

enum class Event {
#define COMPOSER_EVENT_ENUM(name, method) name,
  COMPOSER_FOR_EACH_EVENT(COMPOSER_EVENT_ENUM)
#undef COMPOSER_EVENT_ENUM
};

constexpr int kNumEvents = 40;

/// Every event in declaration order.
const std::array<Event, kNumEvents>& all_events();
/// The enum name, e.g. "BEFORE_FORWARD".
const char* event_name(Event e);
/// The value (= callback method name), e.g. "before_forward".
const char* event_value(Event e);
/// Parses the name or the value in any case ("batch_end", "BATCH_END", "Batch_End"); throws std::invalid_argument
/// naming the input.
Event parse_event(const std::string& text);

/// Names containing BEFORE or ending in _START.
bool is_before_event(Event e);
/// Names containing AFTER or ending in _END.
bool is_after_event(Event e);
/// The value with before_/after_/_start/_end removed ("forward" for BEFORE_FORWARD).
std::string canonical_name(Event e);
bool is_eval_event(Event e);
bool is_predict_event(Event e);

}  // namespace composer
