#include "composer/core/time.h"

#include "utils/detail/text.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <ostream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace composer {
namespace {

using detail::python_float_str;

// Each unit's Composer value ("ep") and key ("epoch"); its StringEnum accepts both, in any case.
struct UnitName {
  TimeUnit unit;
  const char* value;
  const char* key;
};
constexpr std::array<UnitName, 7> kUnitNames{{
    {TimeUnit::ITERATION, "iter", "iteration"},
    {TimeUnit::EPOCH, "ep", "epoch"},
    {TimeUnit::BATCH, "ba", "batch"},
    {TimeUnit::SAMPLE, "sp", "sample"},
    {TimeUnit::TOKEN, "tok", "token"},
    {TimeUnit::DURATION, "dur", "duration"},
    {TimeUnit::SECOND, "sec", "second"},
}};

// 2^63: integer-unit values must stay below it in magnitude (Python's ints are unbounded; ours are int64).
constexpr double kInt64Limit = 9223372036854775808.0;

// Composer's wall-clock form (datetime.strptime '%Hh%Mm%Ss' after filling in missing parts): lower-case h, m and s,
// hours 0-23, minutes 0-59, seconds 0-61; a bare run of digits is seconds. Nullopt when `s` is not in that form.
std::optional<Time> parse_wall_clock(const std::string& s) {
  static const std::regex digits(R"(^\d+$)");
  static const std::regex wall(R"(^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$)");
  std::smatch m;
  if (std::regex_match(s, digits)) {
    try {
      return Time(static_cast<double>(std::stoll(s)), TimeUnit::SECOND);
    } catch (const std::out_of_range&) {
      throw std::invalid_argument("Invalid time string '" + s + "': beyond the int64 range");
    }
  }
  if (!std::regex_match(s, m, wall)) return std::nullopt;
  // strptime's %S takes 60 and 61, but Composer then builds a datetime, which takes 0-59 ("60s" is an error there).
  const int64_t scale[3] = {3600, 60, 1}, limit[3] = {23, 59, 59};
  const char* part[3] = {"hours", "minutes", "seconds"};
  int64_t total = 0;
  for (int i = 0; i < 3; ++i) {
    if (!m[i + 1].matched) continue;
    const std::string v = m[i + 1].str();
    if (v.size() > 2 || std::stoll(v) > limit[i]) {
      throw std::invalid_argument("Invalid time string '" + s + "': " + part[i] + " must be 0-" +
                                  std::to_string(limit[i]) + " in the wall-clock form XhYmZs (as in Composer); got " +
                                  v);
    }
    total += std::stoll(v) * scale[i];
  }
  return Time(total, TimeUnit::SECOND);
}

}  // namespace

const char* to_string(TimeUnit unit) {
  for (const auto& u : kUnitNames)
    if (u.unit == unit) return u.value;
  throw std::logic_error("unknown TimeUnit");
}

TimeUnit parse_time_unit(const std::string& unit) {
  const std::string l = detail::to_lower(unit);
  for (const auto& u : kUnitNames)
    if (l == u.value || l == u.key) return u.unit;
  throw std::invalid_argument("Invalid time unit '" + unit +
                              "': expected one of iter, ep, ba, sp, tok, dur, sec (or iteration, epoch, batch, sample, "
                              "token, duration, second)");
}

Time::Time(double value, TimeUnit unit) : value_(value), unit_(unit) {
  if (std::isnan(value)) throw std::invalid_argument("Time value must be a number, got nan");
  if (unit == TimeUnit::DURATION) {
    if (value_ == 0.0) value_ = 0.0;  // normalise -0.0; +-inf is a duration, as in Composer
    return;
  }
  if (!std::isfinite(value) || std::fabs(value) >= kInt64Limit) {
    throw std::invalid_argument("Time value " + python_float_str(value) + " with unit '" + composer::to_string(unit) +
                                "' is beyond the int64 range");
  }
  if (value != std::trunc(value)) {
    throw std::invalid_argument("Time value " + python_float_str(value) + " with unit '" + composer::to_string(unit) +
                                "' must be an integer (only 'dur' takes fractions)");
  }
}

Time Time::from_string(const std::string& text) {
  if (text.empty()) return Time(0, TimeUnit::SECOND);  // Composer: '' is the wall-clock time 0sec
  if (auto wall = parse_wall_clock(text)) return *wall;
  // NUMBER UNIT, the unit in any case; the number follows Python's float() ('1_000ba', ' 5ep', '5 ep', 'infdur').
  const std::string lower = detail::to_lower(text);
  for (const auto& [unit, value, key] : kUnitNames) {
    const std::string suffix(value);
    if (lower.size() <= suffix.size() || lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    double v = 0;
    if (!detail::parse_python_float(text.substr(0, text.size() - suffix.size()), v)) break;
    if (unit != TimeUnit::DURATION && std::isfinite(v) && v != std::trunc(v)) {
      throw std::invalid_argument("Invalid time string '" + text + "': a value in '" + suffix +
                                  "' must be an integer (only 'dur' takes fractions)");
    }
    try {
      return Time(v, unit);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("Invalid time string '" + text + "': " + e.what());
    }
  }
  throw std::invalid_argument("Invalid time string '" + text +
                              "': expected a number followed by one of iter, ep, ba, sp, tok, dur, sec "
                              "(e.g. '2ep', '500ba', '0.25dur') or a wall-clock time such as '1h30m'");
}

Time Time::from_input(const std::string& text, TimeUnit default_unit) {
  double v = 0;
  static const std::regex number(R"(^\s*[+-]?[\d_.eE+-]+\s*$)");
  if (std::regex_match(text, number) && detail::parse_python_float(text, v))
    return Time(v, default_unit);  // a YAML number
  return from_string(text);
}

std::string Time::to_string() const {
  if (unit_ == TimeUnit::DURATION) return python_float_str(value_) + "dur";
  return std::to_string(int_value()) + composer::to_string(unit_);
}

void Time::require_same_unit(const Time& o, const char* op) const {
  if (unit_ != o.unit_) {
    throw std::invalid_argument(std::string("Cannot ") + op + " " + to_string() + " and " + o.to_string() +
                                " since they have different units");
  }
}

Time Time::operator+(const Time& o) const {
  require_same_unit(o, "add");
  return Time(value_ + o.value_, unit_);
}
Time Time::operator-(const Time& o) const {
  require_same_unit(o, "subtract");
  return Time(value_ - o.value_, unit_);
}
Time Time::operator%(const Time& o) const {
  require_same_unit(o, "take the modulus of");
  if (o.value_ == 0) throw std::invalid_argument("Time modulus by zero: " + to_string() + " % " + o.to_string());
  // Python semantics: the result has the sign of the divisor.
  return Time(value_ - std::floor(value_ / o.value_) * o.value_, unit_);
}
Time Time::operator-() const { return Time(-value_, unit_); }

Time Time::operator*(double factor) const {
  const double v = value_ * factor;
  return Time(unit_ == TimeUnit::DURATION ? v : std::trunc(v), unit_);
}
Time Time::operator/(double divisor) const {
  if (divisor == 0) throw std::invalid_argument("Time division by zero: " + to_string() + " / 0");
  const double v = value_ / divisor;
  return Time(unit_ == TimeUnit::DURATION ? v : std::trunc(v), unit_);
}
Time Time::operator*(const Time& o) const {
  if (unit_ != TimeUnit::DURATION && o.unit_ != TimeUnit::DURATION) {
    throw std::invalid_argument("Cannot multiply " + to_string() + " by " + o.to_string() +
                                ": multiplication needs one side in 'dur'");
  }
  const TimeUnit unit = o.unit_ == TimeUnit::DURATION ? unit_ : o.unit_;
  const double v = value_ * o.value_;
  return Time(unit == TimeUnit::DURATION ? v : std::trunc(v), unit);
}
Time Time::operator/(const Time& o) const {
  require_same_unit(o, "divide");
  if (o.value_ == 0) throw std::invalid_argument("Time division by zero: " + to_string() + " / " + o.to_string());
  return Time(value_ / o.value_, TimeUnit::DURATION);
}

bool Time::operator==(const Time& o) const {
  require_same_unit(o, "compare");
  return value_ == o.value_;
}
bool Time::operator<(const Time& o) const {
  require_same_unit(o, "compare");
  return value_ < o.value_;
}
bool Time::operator<=(const Time& o) const {
  require_same_unit(o, "compare");
  return value_ <= o.value_;
}

std::ostream& operator<<(std::ostream& os, const Time& t) { return os << t.to_string(); }

Time Timestamp::get(TimeUnit unit) const {
  switch (unit) {
    case TimeUnit::ITERATION:
      return Time(iteration, unit);
    case TimeUnit::EPOCH:
      return Time(epoch, unit);
    case TimeUnit::BATCH:
      return Time(batch, unit);
    case TimeUnit::SAMPLE:
      return Time(sample, unit);
    case TimeUnit::TOKEN:
      return Time(token, unit);
    case TimeUnit::SECOND:
      return Time(static_cast<int64_t>(total_wct.count()), unit);
    case TimeUnit::DURATION:
      break;
  }
  throw std::invalid_argument("Timestamp.get: 'dur' is not a Timestamp field (use State::get_elapsed_duration)");
}

Timestamp Timestamp::to_next_batch(int64_t samples, int64_t tokens, Seconds duration) const {
  Timestamp t = *this;
  t.batch += 1;
  t.batch_in_epoch += 1;
  t.sample += samples;
  t.sample_in_epoch += samples;
  t.token += tokens;
  t.token_in_epoch += tokens;
  t.token_in_iteration += tokens;
  t.total_wct += duration;
  t.iteration_wct += duration;
  t.epoch_wct += duration;
  t.batch_wct = duration;
  return t;
}

Timestamp Timestamp::to_next_epoch(Seconds duration) const {
  Timestamp t = *this;
  t.epoch += 1;
  t.epoch_in_iteration += 1;
  t.batch_in_epoch = 0;
  t.sample_in_epoch = 0;
  t.token_in_epoch = 0;
  t.total_wct += duration;
  t.iteration_wct += duration;
  t.epoch_wct = Seconds(0);
  t.batch_wct = Seconds(0);
  return t;
}

Timestamp Timestamp::to_next_iteration(Seconds duration) const {
  Timestamp t = *this;
  t.iteration += 1;
  t.epoch_in_iteration = 0;
  t.token_in_iteration = 0;
  t.batch_in_epoch = 0;
  t.sample_in_epoch = 0;
  t.token_in_epoch = 0;
  t.total_wct += duration;
  t.iteration_wct = Seconds(0);
  t.epoch_wct = Seconds(0);
  t.batch_wct = Seconds(0);
  return t;
}

bool Timestamp::operator==(const Timestamp& o) const {
  return iteration == o.iteration && epoch == o.epoch && batch == o.batch && sample == o.sample && token == o.token &&
         epoch_in_iteration == o.epoch_in_iteration && token_in_iteration == o.token_in_iteration &&
         batch_in_epoch == o.batch_in_epoch && sample_in_epoch == o.sample_in_epoch &&
         token_in_epoch == o.token_in_epoch && total_wct == o.total_wct && iteration_wct == o.iteration_wct &&
         epoch_wct == o.epoch_wct && batch_wct == o.batch_wct;
}

std::string Timestamp::to_string() const {
  std::ostringstream os;
  os << "Timestamp(iteration=" << iteration << ", epoch=" << epoch << ", batch=" << batch << ", sample=" << sample
     << ", token=" << token << ", epoch_in_iteration=" << epoch_in_iteration
     << ", token_in_iteration=" << token_in_iteration << ", batch_in_epoch=" << batch_in_epoch
     << ", sample_in_epoch=" << sample_in_epoch << ", token_in_epoch=" << token_in_epoch
     << ", total_wct=" << total_wct.count() << "s)";
  return os.str();
}

bool operator<(const Timestamp& ts, const Time& t) { return ts.get(t.unit()) < t; }
bool operator>=(const Timestamp& ts, const Time& t) { return ts.get(t.unit()) >= t; }

}  // namespace composer
