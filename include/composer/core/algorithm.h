// Algorithm: a method that changes the model, the batch or the loss at given events (Composer's match/apply).
#pragma once

#include "composer/core/event.h"

#include <ATen/core/ivalue.h>

#include <optional>
#include <string>

namespace composer {

struct State;
class Logger;

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  /// Composer's class name ("BlurPool"); defaults to the C++ class name.
  virtual std::string name() const;
  /// Whether to run at `event`. Must not change the state.
  virtual bool match(Event event, const State& state) = 0;
  /// Runs the algorithm. The return value is an optional exit code (Composer's Optional[int]).
  virtual std::optional<int> apply(Event event, State& state, Logger& logger) = 0;
  /// True when the algorithm leaves some parameters without gradients (DDP's unused-parameter mode).
  virtual bool find_unused_parameters() const { return false; }
  /// True when backward must build a graph (backward(create_graph=True)).
  virtual bool backwards_create_graph() const { return false; }
  /// True when a checkpoint cannot load without this algorithm (model surgery): it is re-created on load.
  virtual bool required_on_load() const { return false; }
  /// How to re-create it: "Name(arg=value, ...)".
  virtual std::string repr() const { return name() + "()"; }
  /// Composer's default {"repr": repr()}; algorithms with state add entries.
  virtual c10::IValue state_dict() const;
  virtual void load_state_dict(const c10::IValue& state);
};

}  // namespace composer
