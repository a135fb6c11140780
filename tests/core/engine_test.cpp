#include "support/test_support.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace composer {
namespace {

using Log = std::vector<std::string>;

class NamedAlgorithm : public Algorithm {
 public:
  NamedAlgorithm(std::string name, Log& log, std::set<Event> events = {})
      : name_(std::move(name)), log_(log), events_(std::move(events)) {}
  std::string name() const override { return name_; }
  bool match(Event e, const State&) override { return events_.empty() || events_.count(e); }
  std::optional<int> apply(Event, State&, Logger&) override {
    log_.push_back("algo:" + name_);
    return std::nullopt;
  }

 private:
  std::string name_;
  Log& log_;
  std::set<Event> events_;
};

class NamedCallback : public Callback {
 public:
  NamedCallback(std::string name, Log& log, bool throw_on_close = false)
      : name_(std::move(name)), log_(log), throw_on_close_(throw_on_close) {}
  void run_event(Event, State&, Logger&) override { log_.push_back("cb:" + name_); }
  void close(State&, Logger&) override {
    log_.push_back("close:" + name_);
    if (throw_on_close_) throw std::runtime_error("boom");
  }
  void post_close() override { log_.push_back("post_close:" + name_); }

 private:
  std::string name_;
  Log& log_;
  bool throw_on_close_;
};

class NamedLogger : public LoggerDestination {
 public:
  NamedLogger(std::string name, Log& log) : name_(std::move(name)), log_(log) {}
  void run_event(Event, State&, Logger&) override { log_.push_back("logger:" + name_); }

 private:
  std::string name_;
  Log& log_;
};

struct EngineFixture : ::testing::Test {
  EngineFixture() : logger(state), engine(state, logger) {
    state.dataloader = &loader;
    state.max_duration = Time(1, TimeUnit::EPOCH);
    // Loggers first in the callback list, as the Trainer builds it.
    state.callbacks = {std::make_shared<NamedLogger>("L", log), std::make_shared<NamedCallback>("C1", log),
                       std::make_shared<NamedCallback>("C2", log)};
    state.algorithms = {std::make_shared<NamedAlgorithm>("A", log), std::make_shared<NamedAlgorithm>("B", log)};
  }
  TensorDataLoader loader{testing::make_blobs(4), TensorDataLoaderOptions(2)};
  Log log;
  State state;
  Logger logger;
  Engine engine;
};

TEST_F(EngineFixture, InitRunsLoggersThenCallbacksThenAlgorithms) {
  engine.run_event(Event::INIT);
  EXPECT_EQ(log, (Log{"logger:L", "cb:C1", "cb:C2", "algo:A", "algo:B"}));
}

TEST_F(EngineFixture, OtherEventsRunAlgorithmsThenCallbacksThenLoggers) {
  engine.run_event(Event::BATCH_START);
  EXPECT_EQ(log, (Log{"algo:A", "algo:B", "cb:C1", "cb:C2", "logger:L"}));
}

TEST_F(EngineFixture, AfterEventsReverseAlgorithmOrder) {
  engine.run_event(Event::AFTER_LOSS);
  EXPECT_EQ(log, (Log{"algo:B", "algo:A", "cb:C1", "cb:C2", "logger:L"}));
  log.clear();
  engine.run_event(Event::BATCH_END);  // *_END is not reversed
  EXPECT_EQ(log.front(), "algo:A");
  log.clear();
  engine.run_event(Event::EVAL_AFTER_FORWARD);  // the name does not start with AFTER_
  EXPECT_EQ(log.front(), "algo:A");
}

TEST_F(EngineFixture, BuiltInPassesPlaceSelectiveBackpropFirstAndLowPrecisionLayerNormLast) {
  state.algorithms = {std::make_shared<NamedAlgorithm>("LowPrecisionLayerNorm", log),
                      std::make_shared<NamedAlgorithm>("A", log),
                      std::make_shared<NamedAlgorithm>("SelectiveBackprop", log)};
  state.callbacks.clear();
  engine.run_event(Event::BATCH_START);
  EXPECT_EQ(log, (Log{"algo:SelectiveBackprop", "algo:A", "algo:LowPrecisionLayerNorm"}));
}

TEST_F(EngineFixture, UserPassesRunAfterBuiltInOnes) {
  state.callbacks.clear();
  engine.register_pass(
      [](std::vector<std::shared_ptr<Algorithm>>& algos, Event) { std::reverse(algos.begin(), algos.end()); });
  engine.run_event(Event::BATCH_START);
  EXPECT_EQ(log, (Log{"algo:B", "algo:A"}));
}

TEST_F(EngineFixture, OnlyMatchingAlgorithmsRun) {
  state.callbacks.clear();
  state.algorithms = {std::make_shared<NamedAlgorithm>("OnlyFit", log, std::set<Event>{Event::FIT_START})};
  engine.run_event(Event::BATCH_START);
  EXPECT_TRUE(log.empty());
  engine.run_event(Event::FIT_START);
  EXPECT_EQ(log, (Log{"algo:OnlyFit"}));
}

TEST_F(EngineFixture, CloseCallsPostCloseOnlyForCallbacksThatClosedCleanly) {
  state.callbacks = {std::make_shared<NamedCallback>("ok", log), std::make_shared<NamedCallback>("bad", log, true)};
  engine.close();
  EXPECT_EQ(log, (Log{"close:ok", "close:bad", "post_close:ok"}));
  EXPECT_TRUE(engine.closed());
  EXPECT_THROW(engine.run_event(Event::BATCH_START), std::logic_error);
  engine.close();  // idempotent
  EXPECT_EQ(log.size(), 3u);
}

TEST_F(EngineFixture, EventsNeedDataloaderAndMaxDuration) {
  state.dataloader = nullptr;
  EXPECT_NO_THROW(engine.run_event(Event::INIT));
  EXPECT_NO_THROW(engine.run_event(Event::EVAL_STANDALONE_START));
  EXPECT_THROW(engine.run_event(Event::BATCH_START), std::logic_error);
  state.dataloader = &loader;
  state.max_duration.reset();
  EXPECT_NO_THROW(engine.run_event(Event::EVAL_START));
  EXPECT_NO_THROW(engine.run_event(Event::PREDICT_START));
  EXPECT_THROW(engine.run_event(Event::FIT_START), std::logic_error);
}

TEST_F(EngineFixture, TracesAreLoggedWhenEnabled) {
  auto mem = std::make_shared<InMemoryLogger>();
  class TraceSink : public LoggerDestination {
   public:
    void log_traces(const std::map<std::string, double>& t) override { traces.insert(t.begin(), t.end()); }
    std::map<std::string, double> traces;
  };
  auto sink = std::make_shared<TraceSink>();
  logger.add_destination(sink);
  engine.set_log_traces(true);
  engine.run_event(Event::BATCH_START);
  EXPECT_EQ(sink->traces.count("algorithm_traces/A/Event.BATCH_START"), 1u);
  EXPECT_EQ(sink->traces.count("algorithm_traces/B/Event.BATCH_START"), 1u);
}

TEST_F(EngineFixture, LateAlgorithmsJoinAndRunInitAlone) {
  engine.run_event(Event::INIT);
  log.clear();
  auto late = std::make_shared<NamedAlgorithm>("Late", log, std::set<Event>{Event::INIT, Event::BATCH_START});
  auto other_event = std::make_shared<NamedAlgorithm>("OnlyBatches", log, std::set<Event>{Event::BATCH_START});
  engine.add_late_algorithms({late, other_event});
  EXPECT_EQ(log, Log{"algo:Late"});  // INIT for the new ones only, and only where they match
  ASSERT_EQ(state.algorithms.size(), 4u);
  EXPECT_EQ(state.algorithms.back()->name(), "OnlyBatches");
  log.clear();
  engine.run_event(Event::BATCH_START);
  EXPECT_EQ(log, (Log{"algo:A", "algo:B", "algo:Late", "algo:OnlyBatches", "cb:C1", "cb:C2", "logger:L"}));
}

TEST_F(EngineFixture, ALateAlgorithmOrderedBeforeOneThatRanIsRefused) {
  engine.register_pass([](std::vector<std::shared_ptr<Algorithm>>& algorithms, Event) {
    std::stable_partition(algorithms.begin(), algorithms.end(), [](const auto& a) { return a->name() == "Late"; });
  });
  auto late = std::make_shared<NamedAlgorithm>("Late", log);
  try {
    engine.add_late_algorithms({late});
    FAIL() << "a late algorithm was put before A";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Late would run at INIT before A"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("load_exclude_algorithms"), std::string::npos) << e.what();
  }
  EXPECT_EQ(state.algorithms.size(), 2u);  // nothing joined
}

}  // namespace
}  // namespace composer
