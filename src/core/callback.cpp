#include "composer/core/callback.h"

#include "composer/core/algorithm.h"
#include "composer/core/serialization.h"
#include "composer/utils/type_name.h"

#include <stdexcept>

namespace composer {

void Callback::run_event(Event event, State& state, Logger& logger) {
  switch (event) {
#define COMPOSER_CALLBACK_DISPATCH(name, method) \
  case Event::name:                              \
    method(state, logger);                       \
    return;
    COMPOSER_FOR_EACH_EVENT(COMPOSER_CALLBACK_DISPATCH)
#undef COMPOSER_CALLBACK_DISPATCH
  }
}

std::string Callback::name() const { return class_name_of(*this); }
c10::IValue Callback::state_dict() const { return new_dict(); }

std::string Algorithm::name() const { return class_name_of(*this); }

c10::IValue Algorithm::state_dict() const {
  Dict d = new_dict();
  d.insert("repr", repr());
  return d;
}

void Algorithm::load_state_dict(const c10::IValue& state) {
  if (!state.isGenericDict()) throw std::invalid_argument("state of algorithm " + name() + " must be a dict");
}

}  // namespace composer
