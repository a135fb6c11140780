#include "composer/core/engine.h"

#include "composer/core/algorithm.h"
#include "composer/core/callback.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"

#include <algorithm>
#include <iostream>
#include <stdexcept>

namespace composer {
namespace {

void stable_move(std::vector<std::shared_ptr<Algorithm>>& algorithms, const std::string& name, bool to_front) {
  std::stable_sort(algorithms.begin(), algorithms.end(), [&](const auto& a, const auto& b) {
    const bool ka = a->name() == name, kb = b->name() == name;
    return to_front ? (ka && !kb) : (!ka && kb);
  });
}

bool is_load_or_init(Event e) { return e == Event::INIT || e == Event::BEFORE_LOAD || e == Event::AFTER_LOAD; }

}  // namespace

void sort_selective_backprop_first(std::vector<std::shared_ptr<Algorithm>>& algorithms, Event) {
  stable_move(algorithms, "SelectiveBackprop", /*to_front=*/true);
}

void sort_low_precision_layernorm_last(std::vector<std::shared_ptr<Algorithm>>& algorithms, Event) {
  stable_move(algorithms, "LowPrecisionLayerNorm", /*to_front=*/false);
}

void set_filo_order(std::vector<std::shared_ptr<Algorithm>>& algorithms, Event event) {
  if (std::string(event_name(event)).rfind("AFTER_", 0) == 0) std::reverse(algorithms.begin(), algorithms.end());
}

Engine::Engine(State& state, Logger& logger) : state_(state), logger_(logger) {}
Engine::~Engine() = default;

void Engine::register_pass(AlgorithmPass pass, int index) {
  if (index < 0 || static_cast<size_t>(index) >= passes_.size()) {
    passes_.push_back(std::move(pass));
  } else {
    passes_.insert(passes_.begin() + index, std::move(pass));
  }
}

void Engine::check_state(Event event) const {
  if (!is_load_or_init(event) && event != Event::EVAL_STANDALONE_START && event != Event::EVAL_STANDALONE_END &&
      state_.dataloader == nullptr) {
    throw std::logic_error(std::string("Engine: the dataloader must be set before event ") + event_name(event));
  }
  if (!is_load_or_init(event) && !is_eval_event(event) && !is_predict_event(event) && !state_.max_duration) {
    throw std::logic_error(std::string("Engine: max_duration must be set before event ") + event_name(event));
  }
}

void Engine::run_event(Event event) {
  if (closed_) {
    throw std::logic_error(std::string("Engine: event ") + event_name(event) +
                           " after close(); the trainer was closed and cannot run again");
  }
  if (observer_) observer_->event_begin(event);
  check_state(event);
  if (event == Event::INIT) {
    run_callbacks(event, /*loggers_first=*/true);
    run_algorithms(event);
  } else {
    run_algorithms(event);
    run_callbacks(event, /*loggers_first=*/false);
  }
  if (observer_) observer_->event_end(event);
}

std::vector<std::shared_ptr<Algorithm>> Engine::ordered(Event event,
                                                        const std::vector<std::shared_ptr<Algorithm>>& algorithms) {
  std::vector<std::shared_ptr<Algorithm>> matched;
  for (const auto& a : algorithms)
    if (a->match(event, state_)) matched.push_back(a);
  if (matched.empty()) return matched;
  sort_selective_backprop_first(matched, event);
  sort_low_precision_layernorm_last(matched, event);
  set_filo_order(matched, event);
  for (auto& pass : passes_) pass(matched, event);
  return matched;
}

void Engine::apply(Event event, const std::vector<std::shared_ptr<Algorithm>>& matched) {
  std::map<std::string, double> traces;
  for (const auto& a : matched) {
    if (observer_) observer_->component_begin(event, "algorithm", a->name());
    a->apply(event, state_, logger_);
    if (observer_) observer_->component_end(event, "algorithm", a->name());
    traces["algorithm_traces/" + a->name() + "/Event." + event_name(event)] = 1.0;  // Composer's key
  }
  if (log_traces_ && !traces.empty()) logger_.log_traces(traces);
}

void Engine::run_algorithms(Event event) { apply(event, ordered(event, state_.algorithms)); }

// Composer's autoload: the late algorithms must come after every algorithm that already ran at INIT.
void Engine::add_late_algorithms(const std::vector<std::shared_ptr<Algorithm>>& algorithms) {
  if (algorithms.empty()) return;
  std::vector<std::shared_ptr<Algorithm>> all = state_.algorithms;
  all.insert(all.end(), algorithms.begin(), algorithms.end());
  const auto is_late = [&](const std::shared_ptr<Algorithm>& a) {
    return std::find(algorithms.begin(), algorithms.end(), a) != algorithms.end();
  };
  std::shared_ptr<Algorithm> first_late;
  for (const auto& a : ordered(Event::INIT, all)) {
    if (is_late(a)) {
      if (!first_late) first_late = a;
    } else if (first_late) {
      throw std::invalid_argument("the checkpoint's required algorithm " + first_late->name() +
                                  " would run at INIT before " + a->name() +
                                  ", which already ran; leave it out with load_exclude_algorithms");
    }
  }
  state_.algorithms = all;
  apply(Event::INIT, ordered(Event::INIT, algorithms));
}

void Engine::run_callbacks(Event event, bool loggers_first) {
  auto is_logger = [](const std::shared_ptr<Callback>& c) {
    return dynamic_cast<LoggerDestination*>(c.get()) != nullptr;
  };
  for (int pass = 0; pass < 2; ++pass) {
    const bool want_loggers = (pass == 0) == loggers_first;
    for (auto& cb : state_.callbacks)
      if (is_logger(cb) == want_loggers) {
        if (observer_) observer_->component_begin(event, "callback", cb->name());
        cb->run_event(event, state_, logger_);
        if (observer_) observer_->component_end(event, "callback", cb->name());
      }
  }
}

void Engine::close() {
  if (closed_) return;
  closed_ = true;
  std::vector<Callback*> closed_ok;
  for (auto& cb : state_.callbacks) {
    try {
      cb->close(state_, logger_);
      closed_ok.push_back(cb.get());
    } catch (const std::exception& e) {
      std::cerr << "composer: error closing callback " << cb->name() << ": " << e.what() << "\n";
    }
  }
  for (auto* cb : closed_ok) {
    try {
      cb->post_close();
    } catch (const std::exception& e) {
      std::cerr << "composer: error in post_close of " << cb->name() << ": " << e.what() << "\n";
    }
  }
}

}  // namespace composer
