#include "composer/core/event.h"

#include "utils/detail/text.h"

#include <stdexcept>

namespace composer {
namespace {

struct EventInfo {
  Event event;
  const char* name;
  const char* value;
};

constexpr std::array<EventInfo, kNumEvents> kEvents{{
#define COMPOSER_EVENT_INFO(name, method) {Event::name, #name, #method},
    COMPOSER_FOR_EACH_EVENT(COMPOSER_EVENT_INFO)
#undef COMPOSER_EVENT_INFO
}};

const EventInfo& info(Event e) { return kEvents.at(static_cast<size_t>(e)); }

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
void erase_all(std::string& s, const std::string& part) {
  for (auto pos = s.find(part); pos != std::string::npos; pos = s.find(part)) s.erase(pos, part.size());
}

}  // namespace

const std::array<Event, kNumEvents>& all_events() {
  static const std::array<Event, kNumEvents> events = [] {
    std::array<Event, kNumEvents> a{};
    for (size_t i = 0; i < kEvents.size(); ++i) a[i] = kEvents[i].event;
    return a;
  }();
  return events;
}

const char* event_name(Event e) { return info(e).name; }
const char* event_value(Event e) { return info(e).value; }

Event parse_event(const std::string& text) {
  const std::string lower = detail::to_lower(text);  // case-insensitive, as Composer's StringEnum
  for (const auto& i : kEvents)
    if (lower == i.value || lower == detail::to_lower(i.name)) return i.event;
  throw std::invalid_argument("Unknown event '" + text +
                              "': expected a Composer event such as 'batch_end' or 'FIT_START'");
}

bool is_before_event(Event e) {
  const std::string n = event_name(e);
  return contains(n, "BEFORE") || ends_with(n, "_START");
}

bool is_after_event(Event e) {
  const std::string n = event_name(e);
  return contains(n, "AFTER") || ends_with(n, "_END");
}

std::string canonical_name(Event e) {
  std::string v = event_value(e);
  for (const char* part : {"before_", "after_", "_start", "_end"}) erase_all(v, part);
  return v;
}

bool is_eval_event(Event e) { return std::string(event_value(e)).rfind("eval", 0) == 0; }
bool is_predict_event(Event e) { return std::string(event_value(e)).rfind("predict", 0) == 0; }

}  // namespace composer
