#include "composer/core/time.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace composer {
namespace {

void expect_error_quoting(const std::string& text) {
  try {
    Time::from_string(text);
    FAIL() << "expected an error for '" << text << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'" + text + "'"), std::string::npos) << e.what();
  }
}

TEST(TimeParse, UnitsAndNumbers) {
  EXPECT_EQ(Time::from_string("2ep"), Time(2, TimeUnit::EPOCH));
  EXPECT_EQ(Time::from_string("100ba"), Time(100, TimeUnit::BATCH));
  EXPECT_EQ(Time::from_string("0.5dur"), Time(0.5, TimeUnit::DURATION));
  EXPECT_EQ(Time::from_string("1e3ba"), Time(1000, TimeUnit::BATCH));
  EXPECT_EQ(Time::from_string("7iter"), Time(7, TimeUnit::ITERATION));
  EXPECT_EQ(Time::from_string("64sp"), Time(64, TimeUnit::SAMPLE));
  EXPECT_EQ(Time::from_string("2048tok"), Time(2048, TimeUnit::TOKEN));
  EXPECT_EQ(Time::from_string("10sec"), Time(10, TimeUnit::SECOND));
}

TEST(TimeParse, CaseInsensitive) {
  EXPECT_EQ(Time::from_string("2EP"), Time(2, TimeUnit::EPOCH));
  EXPECT_EQ(Time::from_string("0.25DuR"), Time(0.25, TimeUnit::DURATION));
  // The wall-clock form is lower case only, as Composer's strptime format.
  EXPECT_THROW(Time::from_string("1H30M"), std::invalid_argument);
}

TEST(TimeParse, NumbersFollowPythonFloat) {
  EXPECT_EQ(Time::from_string("1_000ba"), Time(1000, TimeUnit::BATCH));
  EXPECT_EQ(Time::from_string(" 5ep"), Time(5, TimeUnit::EPOCH));
  EXPECT_EQ(Time::from_string("5 ep"), Time(5, TimeUnit::EPOCH));
  EXPECT_EQ(Time::from_string("+5ep"), Time(5, TimeUnit::EPOCH));
  EXPECT_EQ(Time::from_string(".5dur"), Time(0.5, TimeUnit::DURATION));
  EXPECT_TRUE(std::isinf(Time::from_string("infdur").value()));
  EXPECT_TRUE(std::isinf(Time::from_string("-Infinitydur").value()));
  EXPECT_EQ(Time::from_string("infdur").to_string(), "infdur");
  for (const char* bad : {"1__0ba", "_10ba", "10_ba", "0x10ba", "5ep ", "infba", "nandur"}) {
    EXPECT_THROW(Time::from_string(bad), std::invalid_argument) << bad;
  }
}

TEST(TimeParse, BareNumbersAndEmptyAreSeconds) {
  EXPECT_EQ(Time::from_string(""), Time(0, TimeUnit::SECOND));
  EXPECT_EQ(Time::from_string("5"), Time(5, TimeUnit::SECOND));    // Composer: 50sec (a bug: docs/differences.md)
  EXPECT_EQ(Time::from_string("90"), Time(90, TimeUnit::SECOND));  // Composer: an error
}

TEST(TimeParse, ValuesBeyondInt64AreErrors) {
  for (const char* big :
       {"99999999999999999999ba", "9223372036854775808ba", "1e19ba", "-1e19ep", "99999999999999999999"}) {
    try {
      Time::from_string(big);
      ADD_FAILURE() << big << " parsed";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("int64"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(Time::from_string("1e18ba").int_value(), 1000000000000000000);
  EXPECT_THROW(Time(1e19, TimeUnit::BATCH), std::invalid_argument);
}

TEST(TimeParse, UnitNamesAsComposerAcceptsThem) {
  EXPECT_EQ(parse_time_unit("EP"), TimeUnit::EPOCH);
  EXPECT_EQ(parse_time_unit("epoch"), TimeUnit::EPOCH);
  EXPECT_EQ(parse_time_unit("Batch"), TimeUnit::BATCH);
  EXPECT_EQ(parse_time_unit("ITERATION"), TimeUnit::ITERATION);
  EXPECT_EQ(parse_time_unit("second"), TimeUnit::SECOND);
  EXPECT_THROW(parse_time_unit("epochs"), std::invalid_argument);
}

TEST(TimeParse, WallClock) {
  EXPECT_EQ(Time::from_string("1h30m"), Time(5400, TimeUnit::SECOND));
  EXPECT_EQ(Time::from_string("2h"), Time(7200, TimeUnit::SECOND));
  EXPECT_EQ(Time::from_string("45m"), Time(2700, TimeUnit::SECOND));
  EXPECT_EQ(Time::from_string("30s"), Time(30, TimeUnit::SECOND));
  EXPECT_EQ(Time::from_string("1h2m3s"), Time(3723, TimeUnit::SECOND));
  // Composer's ranges: hours 0-23, minutes 0-59, seconds 0-59 (strptime reads 60 and 61, then datetime refuses them).
  EXPECT_EQ(Time::from_string("23h59m59s"), Time(23 * 3600 + 59 * 60 + 59, TimeUnit::SECOND));
  for (const char* bad : {"24h", "90m", "1h70m", "60s", "61s", "62s", "001h"})
    EXPECT_THROW(Time::from_string(bad), std::invalid_argument) << bad;
}

TEST(TimeParse, ErrorsQuoteTheInput) {
  for (const char* bad : {"ep", "abc", "1.5ep", "2  ep x", "3xyz", "nanba", "1e400ba", "1m2h"})
    expect_error_quoting(bad);
}

TEST(TimeParse, FromInputUsesDefaultUnitForNumbers) {
  EXPECT_EQ(Time::from_input("3", TimeUnit::EPOCH), Time(3, TimeUnit::EPOCH));
  EXPECT_EQ(Time::from_input("3ba", TimeUnit::EPOCH), Time(3, TimeUnit::BATCH));
}

TEST(TimeConstruct, NonDurationMustBeIntegral) {
  EXPECT_THROW(Time(1.5, TimeUnit::EPOCH), std::invalid_argument);
  EXPECT_NO_THROW(Time(1.5, TimeUnit::DURATION));
}

TEST(TimePrint, LikePython) {
  EXPECT_EQ(Time(5, TimeUnit::EPOCH).to_string(), "5ep");
  EXPECT_EQ(Time(0.5, TimeUnit::DURATION).to_string(), "0.5dur");
  EXPECT_EQ(Time(1.0, TimeUnit::DURATION).to_string(), "1.0dur");
  EXPECT_EQ(Time(12, TimeUnit::TOKEN).to_string(), "12tok");
  EXPECT_EQ(Time::from_string("1h30m").to_string(), "5400sec");
}

TEST(TimeArithmetic, SameUnitOperations) {
  const Time a(7, TimeUnit::BATCH), b(3, TimeUnit::BATCH);
  EXPECT_EQ(a + b, Time(10, TimeUnit::BATCH));
  EXPECT_EQ(a - b, Time(4, TimeUnit::BATCH));
  EXPECT_EQ(a % b, Time(1, TimeUnit::BATCH));
  EXPECT_EQ(Time(-7, TimeUnit::BATCH) % b, Time(2, TimeUnit::BATCH));  // Python's sign rule
  EXPECT_EQ(-a, Time(-7, TimeUnit::BATCH));
  EXPECT_TRUE(b < a);
  EXPECT_TRUE(a >= a);
  EXPECT_FALSE(a <= b);
}

TEST(TimeArithmetic, UnitMismatchThrows) {
  const Time ep(2, TimeUnit::EPOCH), ba(2, TimeUnit::BATCH);
  EXPECT_THROW(ep + ba, std::invalid_argument);
  EXPECT_THROW(ep - ba, std::invalid_argument);
  EXPECT_THROW((void)(ep < ba), std::invalid_argument);
  EXPECT_THROW((void)(ep == ba), std::invalid_argument);
  EXPECT_THROW(ep / ba, std::invalid_argument);
  EXPECT_THROW(ep * ba, std::invalid_argument);
}

TEST(TimeArithmetic, ScalingTruncatesToInteger) {
  EXPECT_EQ(Time(10, TimeUnit::BATCH) * 0.25, Time(2, TimeUnit::BATCH));
  EXPECT_EQ(Time(10, TimeUnit::BATCH) / 4.0, Time(2, TimeUnit::BATCH));
  EXPECT_EQ(Time(-10, TimeUnit::BATCH) / 4.0, Time(-2, TimeUnit::BATCH));  // int() truncates toward zero
  EXPECT_EQ(Time(0.5, TimeUnit::DURATION) * 0.5, Time(0.25, TimeUnit::DURATION));
}

TEST(TimeArithmetic, TimeTimesDurationKeepsOtherUnit) {
  EXPECT_EQ(Time(100, TimeUnit::BATCH) * Time(0.55, TimeUnit::DURATION), Time(55, TimeUnit::BATCH));
  EXPECT_EQ(Time(0.5, TimeUnit::DURATION) * Time(9, TimeUnit::EPOCH), Time(4, TimeUnit::EPOCH));
  EXPECT_EQ(Time(0.5, TimeUnit::DURATION) * Time(0.5, TimeUnit::DURATION), Time(0.25, TimeUnit::DURATION));
}

TEST(TimeArithmetic, TimeOverTimeIsDuration) {
  const Time r = Time(25, TimeUnit::BATCH) / Time(100, TimeUnit::BATCH);
  EXPECT_EQ(r.unit(), TimeUnit::DURATION);
  EXPECT_DOUBLE_EQ(r.value(), 0.25);
  EXPECT_THROW(Time(1, TimeUnit::BATCH) / Time(0, TimeUnit::BATCH), std::invalid_argument);
}

TEST(TimestampTest, ToNextBatchAdvancesCountersAndClocks) {
  Timestamp t;
  t = t.to_next_batch(32, 100, Seconds(0.5));
  t = t.to_next_batch(16, 50, Seconds(0.25));
  EXPECT_EQ(t.batch, 2);
  EXPECT_EQ(t.batch_in_epoch, 2);
  EXPECT_EQ(t.sample, 48);
  EXPECT_EQ(t.sample_in_epoch, 48);
  EXPECT_EQ(t.token, 150);
  EXPECT_EQ(t.token_in_epoch, 150);
  EXPECT_EQ(t.token_in_iteration, 150);
  EXPECT_DOUBLE_EQ(t.total_wct.count(), 0.75);
  EXPECT_DOUBLE_EQ(t.epoch_wct.count(), 0.75);
  EXPECT_DOUBLE_EQ(t.iteration_wct.count(), 0.75);
  EXPECT_DOUBLE_EQ(t.batch_wct.count(), 0.25);
  EXPECT_EQ(t.epoch, 0);
}

TEST(TimestampTest, ToNextEpochResetsInEpochCounters) {
  Timestamp t = Timestamp().to_next_batch(8, 4, Seconds(1)).to_next_epoch(Seconds(2));
  EXPECT_EQ(t.epoch, 1);
  EXPECT_EQ(t.epoch_in_iteration, 1);
  EXPECT_EQ(t.batch_in_epoch, 0);
  EXPECT_EQ(t.sample_in_epoch, 0);
  EXPECT_EQ(t.token_in_epoch, 0);
  EXPECT_EQ(t.batch, 1);
  EXPECT_EQ(t.token_in_iteration, 4);
  EXPECT_DOUBLE_EQ(t.total_wct.count(), 3.0);
  EXPECT_DOUBLE_EQ(t.iteration_wct.count(), 3.0);
  EXPECT_DOUBLE_EQ(t.epoch_wct.count(), 0.0);
  EXPECT_DOUBLE_EQ(t.batch_wct.count(), 0.0);
}

TEST(TimestampTest, ToNextIterationResetsIterationCounters) {
  Timestamp t = Timestamp().to_next_batch(8, 4, Seconds(1)).to_next_epoch().to_next_iteration(Seconds(1));
  EXPECT_EQ(t.iteration, 1);
  EXPECT_EQ(t.epoch_in_iteration, 0);
  EXPECT_EQ(t.token_in_iteration, 0);
  EXPECT_EQ(t.epoch, 1);
  EXPECT_DOUBLE_EQ(t.total_wct.count(), 2.0);
  EXPECT_DOUBLE_EQ(t.iteration_wct.count(), 0.0);
}

TEST(TimestampTest, GetAndCompareWithTime) {
  Timestamp t = Timestamp().to_next_batch(10, 0, Seconds(2.7)).to_next_batch(10, 0, Seconds(1.0));
  EXPECT_EQ(t.get(TimeUnit::BATCH), Time(2, TimeUnit::BATCH));
  EXPECT_EQ(t.get(TimeUnit::SAMPLE), Time(20, TimeUnit::SAMPLE));
  EXPECT_EQ(t.get(TimeUnit::SECOND), Time(3, TimeUnit::SECOND));
  EXPECT_THROW(t.get(TimeUnit::DURATION), std::invalid_argument);
  EXPECT_TRUE(t >= Time(2, TimeUnit::BATCH));
  EXPECT_TRUE(t < Time(21, TimeUnit::SAMPLE));
  EXPECT_TRUE(t < Time(1, TimeUnit::EPOCH));
}

TEST(TimestampTest, EqualityComparesEveryFieldWallClocksIncluded) {
  const Timestamp a = Timestamp().to_next_batch(10, 0, Seconds(2.0));
  Timestamp b = a;
  EXPECT_EQ(a, b);
  b.batch_wct = Seconds(3.0);
  EXPECT_NE(a, b);
  b = a;
  b.total_wct += Seconds(1.0);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace composer
