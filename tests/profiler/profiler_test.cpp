// The profiler: Composer's schedule (against Composer's own), a real training run's Chrome trace (markers nested,
// Kineto's operators inside them, Composer's merger reading it), the system profiler's counters against psutil, and
// the bad inputs.
#include "composer/composer.h"
#include "support/python.h"
#include "support/run_files.h"
#include "support/test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

namespace composer {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// A trace handler that keeps what it is handed, in memory.
class RecordingHandler : public TraceHandler {
 public:
  struct Counter {
    std::string name;
    std::map<std::string, double> values;
  };
  void process_counter_event(const std::string& name, const std::vector<std::string>&, int64_t,
                             const std::map<std::string, double>& values) override {
    std::lock_guard<std::mutex> lock(mutex);
    counters.push_back({name, values});
  }
  std::mutex mutex;
  std::vector<Counter> counters;
};

TEST(ProfilerScheduleTest, CyclicScheduleIsComposers) {
  COMPOSER_REQUIRE_PYTHON("composer");
  const auto py = testing::run_python({testing::peer_script("cyclic_schedule.py")});
  ASSERT_EQ(py.status, 0) << py.output;
  std::istringstream lines(py.output);
  int compared = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto colon = line.find(": ");
    if (colon == std::string::npos) continue;
    std::istringstream args(line.substr(0, colon));
    int64_t skip_first, wait, warmup, active, repeat, resumed;
    std::string length;
    args >> skip_first >> wait >> warmup >> active >> repeat >> resumed >> length;
    const auto options =
        CyclicScheduleOptions().skip_first(skip_first).wait(wait).warmup(warmup).active(active).repeat(repeat);
    const std::optional<int64_t> len = length == "None" ? std::nullopt : std::optional<int64_t>(std::stoll(length));
    std::string ours;
    for (int64_t batch = 0; batch < 16; ++batch) {
      ours += std::string(ours.empty() ? "" : " ") +
              profiler_action_name(cyclic_schedule_action(options, batch, resumed, len));
    }
    EXPECT_EQ(ours, line.substr(colon + 2)) << line.substr(0, colon);
    ++compared;
  }
  EXPECT_EQ(compared, 2 * 2 * 2 * 2 * 3 * 2 * 2);
}

TEST(ProfilerScheduleTest, BadScheduleNamesTheField) {
  EXPECT_NE(error_of([] {
              cyclic_schedule(CyclicScheduleOptions().active(0));
            }).find("profiler schedule active: must be >= 1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              cyclic_schedule(CyclicScheduleOptions().wait(-1));
            }).find("profiler schedule wait: must be >= 0 (got -1)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Profiler({}, ProfilerOptions().sys_prof_stats_thread_interval_seconds(0));
            }).find("sys_prof_stats_thread_interval_seconds: must be > 0"),
            std::string::npos);
}

struct TraceRun {
  fs::path dir;
  std::shared_ptr<JsonTraceHandler> json;
};

// 8 batches; skip 1, wait 1, warm up 1, record 2: batch 2 warms up, 3 and 4 are recorded, 4 saves (as batch 5).
TraceRun train_with_profiler(const std::string& name) {
  TraceRun run{testing::fresh_dir(name), nullptr};
  run.json = std::make_shared<JsonTraceHandler>(JsonTraceHandlerOptions().folder((run.dir / "traces").string()));
  auto profiler = std::make_shared<Profiler>(
      std::vector<std::shared_ptr<TraceHandler>>{run.json},
      ProfilerOptions()
          .schedule(CyclicScheduleOptions().skip_first(1).wait(1).warmup(1).active(2).repeat(1))
          .torch_prof_folder((run.dir / "torch").string())
          .torch_prof_record_shapes(true));
  Trainer trainer(testing::quiet_options(testing::make_classifier(8, 32, 4))
                      .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
                      .max_duration("1ep")
                      .profiler(profiler));
  trainer.fit();
  return run;
}

TEST(ProfilerTest, TrainingWritesOneChromeTracePerWindowWithNestedMarkersAndKinetoOperators) {
  const TraceRun run = train_with_profiler("profiler_trace");
  const fs::path window = run.dir / "traces" / "ep0-ba5-rank0.json";
  ASSERT_TRUE(fs::exists(window));
  EXPECT_TRUE(fs::exists(run.dir / "traces" / "merged_trace.json"));
  EXPECT_TRUE(fs::exists(run.dir / "torch" / "rank0.5.pt.trace.json"));
  EXPECT_EQ(run.json->saved_traces(), std::vector<std::string>{window.string()});
  EXPECT_FALSE(testing::has_temp_file(run.dir / "traces"));
  const nlohmann::json events = read_json(window);
  ASSERT_TRUE(events.is_array());

  // Durations nest per thread: every E closes the innermost open B of its name. Left open at the window's end: the
  // fit and the epoch (recorded throughout). The handler's own batch_end, which writes the file, already sees the
  // next batch's action (SKIP) and is not recorded.
  std::map<std::string, std::vector<std::pair<std::string, double>>> open;  // pid/tid -> stack of (name, ts)
  std::vector<int64_t> batch_starts;
  std::vector<std::pair<double, double>> batches, forwards;
  std::set<std::string> names;
  for (const auto& e : events) {
    const std::string ph = e.value("ph", "");
    if (ph != "B" && ph != "E") continue;
    const std::string thread = e["pid"].dump() + "/" + e["tid"].dump();
    const std::string name = e["name"];
    names.insert(name);
    if (ph == "B") {
      open[thread].push_back({name, e["ts"].get<double>()});
      if (name == "event/batch") batch_starts.push_back(e["args"]["batch"]);
      continue;
    }
    ASSERT_FALSE(open[thread].empty()) << "E without B: " << name;
    ASSERT_EQ(open[thread].back().first, name) << "E of " << name << " closes " << open[thread].back().first;
    if (name == "event/batch") batches.push_back({open[thread].back().second, e["ts"].get<double>()});
    if (name == "event/forward") forwards.push_back({open[thread].back().second, e["ts"].get<double>()});
    open[thread].pop_back();
  }
  for (const auto& [thread, stack] : open) {
    std::set<std::string> left;
    for (const auto& [name, ts] : stack) left.insert(name);
    EXPECT_EQ(left, (std::set<std::string>{"event/fit", "event/epoch"}));
  }
  EXPECT_EQ(batch_starts, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(forwards.size(), 3u);
  for (const char* expected : {"event/dataloader", "event/forward", "event/loss", "event/backward", "event/train_batch",
                               "callback/JSONTraceHandler/event/batch_start"}) {
    EXPECT_TRUE(names.count(expected)) << expected;
  }

  // Kineto's operators (batches 3 and 4) lie inside the recorded batches, and forwards hold aten operators.
  int ops = 0, ops_in_forward = 0;
  for (const auto& e : events) {
    if (e.value("ph", "") != "X" || e.value("cat", "") != "cpu_op") continue;
    ++ops;
    const double ts = e["ts"].get<double>(), end = ts + e.value("dur", 0.0);
    EXPECT_GE(ts, batches[1].first - 1000) << e.dump();  // 1 ms for the two clocks' conversion
    EXPECT_LE(end, batches[2].second + 1000) << e.dump();
    for (const auto& [b, f] : forwards)
      if (ts >= b && end <= f && e["name"].get<std::string>().rfind("aten::", 0) == 0) ++ops_in_forward;
  }
  EXPECT_GT(ops, 10);
  EXPECT_GT(ops_in_forward, 0);
  int metadata = 0;
  for (const auto& e : events)
    if (e.value("ph", "") == "M" && e.value("name", "") == "clock_sync_timestamp_us") ++metadata;
  EXPECT_EQ(metadata, 1);
}

TEST(ProfilerTest, ComposersMergerReadsOurTrace) {
  COMPOSER_REQUIRE_PYTHON("composer");
  const TraceRun run = train_with_profiler("profiler_composer_merge");
  const fs::path merged = run.dir / "composer_merged.json";
  const auto py = testing::run_python(
      {"-c", "import sys; from composer.profiler.json_trace_merger import merge_traces; merge_traces(*sys.argv[1:])",
       merged.string(), (run.dir / "traces" / "ep0-ba5-rank0.json").string()});
  ASSERT_EQ(py.status, 0) << py.output;
  const nlohmann::json events = read_json(merged);
  int batches = 0;
  for (const auto& e : events)
    if (e.value("name", "") == "event/batch" && e.value("ph", "") == "B") ++batches;
  EXPECT_EQ(batches, 3);
}

TEST(ProfilerTest, SystemProfilerCountersAreComposersNamesWithPsutilsValues) {
  COMPOSER_REQUIRE_PYTHON("psutil");
  auto handler = std::make_shared<RecordingHandler>();
  auto profiler = std::make_shared<Profiler>([](const State&, int64_t) { return ProfilerAction::ACTIVE; },
                                             std::vector<std::shared_ptr<TraceHandler>>{handler},
                                             ProfilerOptions()
                                                 .sys_prof_memory(true)
                                                 .sys_prof_disk(true)
                                                 .sys_prof_net(true)
                                                 .torch_prof_profile_memory(false)
                                                 .torch_prof_with_flops(false));
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
                      .max_duration("1ba")
                      .profiler(profiler));
  trainer.fit();
  SystemProfiler sampler(*profiler);
  sampler.sample();
  sampler.sample();
  const auto py = testing::run_python(
      {"-c",
       "import psutil, json; v = psutil.virtual_memory(); print(json.dumps({'available': v.available / 2**30}))"});
  ASSERT_EQ(py.status, 0) << py.output;
  const double available = nlohmann::json::parse(py.output)["available"];
  std::map<std::string, std::map<std::string, double>> last;
  {
    std::lock_guard<std::mutex> lock(handler->mutex);
    for (const auto& c : handler->counters) last[c.name] = c.values;
  }
  ASSERT_TRUE(last.count("cpu"));
  EXPECT_GE(last["cpu"]["cpu_percent"], 0.0);
  EXPECT_LE(last["cpu"]["cpu_percent"], 100.0);
  ASSERT_TRUE(last.count("memory/virtual"));
  EXPECT_NEAR(last["memory/virtual"]["available_gb"], available, 0.1 * available);
  EXPECT_GT(last["memory/virtual"]["used_gb"], 0.0);
  EXPECT_TRUE(last.count("memory/swap"));
  EXPECT_TRUE(last.count("network/lo/kb_sent"));
  bool disk = false;
  for (const auto& [name, values] : last)
    if (name.rfind("disk/", 0) == 0 && name.size() > 11 && name.substr(name.size() - 11) == "/read_count")
      disk = values.count("field_name") == 1;
  EXPECT_TRUE(disk || !fs::exists("/proc/diskstats") || fs::file_size("/proc/diskstats") == 0);
}

TEST(ProfilerTest, NonEmptyTraceFolderStopsTheRunAtInitAndKeepsItsFiles) {
  const fs::path dir = testing::fresh_dir("profiler_nonempty");
  fs::create_directories(dir / "traces");
  std::ofstream(dir / "traces" / "keep.json") << "[1]";
  auto json = std::make_shared<JsonTraceHandler>(JsonTraceHandlerOptions().folder((dir / "traces").string()));
  auto profiler = std::make_shared<Profiler>(std::vector<std::shared_ptr<TraceHandler>>{json},
                                             ProfilerOptions().torch_prof_folder((dir / "torch").string()));
  const std::string error = error_of([&] {
    Trainer trainer(testing::quiet_options(testing::make_classifier())
                        .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
                        .max_duration("1ep")
                        .profiler(profiler));
    trainer.fit();
  });
  EXPECT_NE(error.find("JSONTraceHandler folder " + (dir / "traces").string() + ": not empty"), std::string::npos)
      << error;
  std::ifstream in(dir / "traces" / "keep.json");
  std::string kept;
  in >> kept;
  EXPECT_EQ(kept, "[1]");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "traces"), fs::directory_iterator()), 1);
}

TEST(ProfilerTest, TraceHandlerWithoutAProfilerIsAClearError) {
  const fs::path dir = testing::fresh_dir("profiler_no_profiler");
  const std::string error = error_of([&] {
    Trainer trainer(
        testing::quiet_options(testing::make_classifier())
            .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
            .max_duration("1ep")
            .callbacks({std::make_shared<JsonTraceHandler>(JsonTraceHandlerOptions().folder(dir.string()))}));
  });
  EXPECT_NE(error.find("JSONTraceHandler: no profiler"), std::string::npos) << error;
}

}  // namespace
}  // namespace composer
