#include "composer/core/time.h"

#include "utils/detail/text.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <ostream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace composer {
namespace {

using detail::python_float_str;

constexpr std::array<std::pair<TimeUnit, const char*>, 7> kUnitNames{{
    {TimeUnit::ITERATION, "iter"},
    {TimeUnit::EPOCH, "ep"},
    {TimeUnit::BATCH, "ba"},
    {TimeUnit::SAMPLE, "sp"},
    {TimeUnit::TOKEN, "tok"},
    {TimeUnit::DURATION, "dur"},
    {TimeUnit::SECOND, "sec"},
}};

// Parses the whole of `s` as a finite float; false if anything is left over.
bool parse_float(const std::string& s, double& out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s.front()))) return false;
  const char* begin = s.c_str();
  char* end = nullptr;
  out = std::strtod(begin, &end);
  return end == begin + s.size() && std::isfinite(out);
}

}  // namespace

const char* to_string(TimeUnit unit) {
  for (const auto& [u, name] : kUnitNames)
    if (u == unit) return name;
  throw std::logic_error("unknown TimeUnit");
}

TimeUnit parse_time_unit(const std::string& unit) {
  const std::string l = detail::to_lower(unit);
  for (const auto& [u, name] : kUnitNames)
    if (l == name) return u;
  throw std::invalid_argument("Invalid time unit '" + unit + "': expected one of iter, ep, ba, sp, tok, dur, sec");
}

Time::Time(double value, TimeUnit unit) : value_(value), unit_(unit) {
  if (!std::isfinite(value)) throw std::invalid_argument("Time value must be finite, got " + python_float_str(value));
  if (unit != TimeUnit::DURATION && value != std::trunc(value)) {
    throw std::invalid_argument("Time value " + python_float_str(value) + " with unit '" + composer::to_string(unit) +
                                "' must be an integer (only 'dur' takes fractions)");
  }
  if (unit == TimeUnit::DURATION && value_ == 0.0) value_ = 0.0;  // normalise -0.0
}

Time Time::from_string(const std::string& text) {
  const std::string s = detail::to_lower(text);
  // Wall-clock form first: any subset of XhYmZs, in that order.
  static const std::regex wall(R"(^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$)");
  std::smatch m;
  if (!s.empty() && std::regex_match(s, m, wall)) {
    int64_t total = 0;
    const int64_t scale[3] = {3600, 60, 1};
    for (int i = 0; i < 3; ++i)
      if (m[i + 1].matched) total += std::stoll(m[i + 1].str()) * scale[i];
    return Time(total, TimeUnit::SECOND);
  }
  // Then NUMBER UNIT; the longest numeric prefix wins, as with the greedy regex ^(.+)(unit)$.
  for (const auto& [unit, name] : kUnitNames) {
    const std::string suffix(name);
    if (s.size() <= suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    double v = 0;
    if (!parse_float(s.substr(0, s.size() - suffix.size()), v)) continue;
    if (unit != TimeUnit::DURATION && v != std::trunc(v)) {
      throw std::invalid_argument("Invalid time string '" + text + "': a value in '" + suffix +
                                  "' must be an integer (only 'dur' takes fractions)");
    }
    return Time(v, unit);
  }
  throw std::invalid_argument("Invalid time string '" + text +
                              "': expected a number followed by one of iter, ep, ba, sp, tok, dur, sec "
                              "(e.g. '2ep', '500ba', '0.25dur') or a wall-clock time such as '1h30m'");
}

Time Time::from_input(const std::string& text, TimeUnit default_unit) {
  double v = 0;
  if (parse_float(text, v)) return Time(v, default_unit);
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
    case TimeUnit::ITERATION: return Time(iteration, unit);
    case TimeUnit::EPOCH: return Time(epoch, unit);
    case TimeUnit::BATCH: return Time(batch, unit);
    case TimeUnit::SAMPLE: return Time(sample, unit);
    case TimeUnit::TOKEN: return Time(token, unit);
    case TimeUnit::SECOND: return Time(static_cast<int64_t>(total_wct.count()), unit);
    case TimeUnit::DURATION: break;
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
         token_in_epoch == o.token_in_epoch;
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
