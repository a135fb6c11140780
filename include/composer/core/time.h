// Time: Composer's duration type ("2ep", "500ba", "0.25dur", "1h30m") and the Timestamp of a run.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>

namespace composer {

/// Units of Time, with Composer's string values.
enum class TimeUnit { ITERATION, EPOCH, BATCH, SAMPLE, TOKEN, DURATION, SECOND };

/// "iter", "ep", "ba", "sp", "tok", "dur", "sec".
const char* to_string(TimeUnit unit);
/// Parses a unit string case-insensitively; throws std::invalid_argument naming the input.
TimeUnit parse_time_unit(const std::string& unit);

/// A quantity of time in one unit. `dur` values are fractions of max_duration (floats); every other unit holds
/// a whole number. Arithmetic follows Composer: + - % and comparisons need equal units, * and / by a number scale
/// and truncate back to an integer, Time*Time needs one `dur` side, Time/Time (same unit) gives `dur`.
class Time {
 public:
  /// Requires: `value` integral unless `unit` is DURATION (throws std::invalid_argument otherwise).
  Time(double value, TimeUnit unit);
  Time(int64_t value, TimeUnit unit) : Time(static_cast<double>(value), unit) {}
  Time(int value, TimeUnit unit) : Time(static_cast<double>(value), unit) {}

  /// Parses Composer's time strings: NUMBER UNIT with the unit in any case and the number as Python's float() reads
  /// it ("2ep", "100ba", "0.5dur", "1e3ba", "1_000ba", " 5ep", "5 ep", "infdur"), the wall-clock form "1h30m"
  /// (-> 5400sec; lower-case h/m/s, hours < 24, minutes < 60, seconds < 60) and "" (0sec). A bare run of digits is
  /// seconds (Composer turns "5" into 50sec and rejects "7": docs/differences.md). Integer units must stay inside
  /// int64. Throws std::invalid_argument quoting `text` when it is not a Time string.
  static Time from_string(const std::string& text);
  /// A string is parsed; otherwise use the number with `default_unit` (Composer's Time.from_input).
  static Time from_input(const std::string& text, TimeUnit default_unit);
  static Time from_input(int64_t value, TimeUnit default_unit) { return Time(value, default_unit); }

  static Time from_iteration(int64_t v) { return Time(v, TimeUnit::ITERATION); }
  static Time from_epoch(int64_t v) { return Time(v, TimeUnit::EPOCH); }
  static Time from_batch(int64_t v) { return Time(v, TimeUnit::BATCH); }
  static Time from_sample(int64_t v) { return Time(v, TimeUnit::SAMPLE); }
  static Time from_token(int64_t v) { return Time(v, TimeUnit::TOKEN); }
  static Time from_duration(double v) { return Time(v, TimeUnit::DURATION); }
  static Time from_second(int64_t v) { return Time(v, TimeUnit::SECOND); }

  double value() const { return value_; }
  /// The value as an integer (truncated for `dur`).
  int64_t int_value() const { return static_cast<int64_t>(value_); }
  TimeUnit unit() const { return unit_; }

  /// "5ep", "0.5dur", "1.0dur" (Python's str(Time)).
  std::string to_string() const;

  Time operator+(const Time& o) const;
  Time operator-(const Time& o) const;
  Time operator%(const Time& o) const;
  Time operator-() const;
  Time operator*(double factor) const;
  Time operator/(double divisor) const;
  /// One side must be `dur`; the result keeps the other side's unit.
  Time operator*(const Time& o) const;
  /// Same units; the result is `dur`.
  Time operator/(const Time& o) const;

  // Comparisons require equal units (std::invalid_argument otherwise).
  bool operator==(const Time& o) const;
  bool operator!=(const Time& o) const { return !(*this == o); }
  bool operator<(const Time& o) const;
  bool operator<=(const Time& o) const;
  bool operator>(const Time& o) const { return o < *this; }
  bool operator>=(const Time& o) const { return o <= *this; }

 private:
  void require_same_unit(const Time& o, const char* op) const;
  double value_;
  TimeUnit unit_;
};

std::ostream& operator<<(std::ostream& os, const Time& t);

/// Wall-clock durations inside a Timestamp (seconds, fractional).
using Seconds = std::chrono::duration<double>;

/// Where a run is. Immutable by convention: the to_next_* methods return a new Timestamp.
struct Timestamp {
  int64_t iteration = 0;
  int64_t epoch = 0;
  int64_t batch = 0;
  int64_t sample = 0;
  int64_t token = 0;
  int64_t epoch_in_iteration = 0;
  int64_t token_in_iteration = 0;
  int64_t batch_in_epoch = 0;
  int64_t sample_in_epoch = 0;
  int64_t token_in_epoch = 0;
  Seconds total_wct{0};
  Seconds iteration_wct{0};
  Seconds epoch_wct{0};
  Seconds batch_wct{0};

  /// The total count in `unit` (`sec` = whole seconds of total_wct). `dur` is not a Timestamp field: throws.
  Time get(TimeUnit unit) const;

  /// After one batch of `samples` samples and `tokens` tokens that took `duration`.
  Timestamp to_next_batch(int64_t samples, int64_t tokens = 0, Seconds duration = Seconds(0)) const;
  /// After an epoch boundary: epoch+1, the *_in_epoch counters and epoch/batch wall clocks reset.
  Timestamp to_next_epoch(Seconds duration = Seconds(0)) const;
  /// After an iteration boundary: iteration+1, *_in_iteration and *_in_epoch counters reset.
  Timestamp to_next_iteration(Seconds duration = Seconds(0)) const;

  /// Every field, the wall clocks included (Composer compares state_dicts).
  bool operator==(const Timestamp& o) const;
  bool operator!=(const Timestamp& o) const { return !(*this == o); }
  std::string to_string() const;
};

// Comparing a Timestamp with a Time uses timestamp.get(time.unit()).
bool operator<(const Timestamp& ts, const Time& t);
bool operator>=(const Timestamp& ts, const Time& t);

}  // namespace composer
