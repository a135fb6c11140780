// JsonTraceHandler: the profiler's markers as Chrome JSON traces, one file per active window, plus a merged trace
// of the node's ranks (Composer's JSONTraceHandler and merge_traces).
#pragma once

#include "composer/core/time.h"
#include "composer/profiler/trace_handler.h"

#include <torch/arg.h>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace composer {

struct JsonTraceHandlerOptions {
  /// The traces' folder (format variables {run_name} {rank} ...).
  TORCH_ARG(std::string, folder) = "{run_name}/traces";
  /// Each window's trace (also {epoch} {batch} ...; the timestamp at the window's last batch).
  TORCH_ARG(std::string, filename) = "ep{epoch}-ba{batch}-rank{rank}.json";
  /// Each window's trace uploaded through the loggers that take files; empty: not uploaded.
  TORCH_ARG(std::string, remote_file_name) = "{run_name}/traces/ep{epoch}-ba{batch}-rank{rank}.json";
  /// The node's ranks' windows merged into one trace in `folder` (rewritten after every window); empty: none.
  TORCH_ARG(std::string, merged_trace_filename) = "merged_trace.json";
  TORCH_ARG(std::string, merged_trace_remote_file_name) = "{run_name}/traces/merged_trace.json";
  /// Allow a non-empty folder (else INIT stops the run naming it; nothing is overwritten).
  TORCH_ARG(bool, overwrite) = false;
  /// Window traces kept on disk (oldest deleted first); -1 keeps all.
  TORCH_ARG(int64_t, num_traces_to_keep) = -1;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("folder", self.folder_, "folder of the trace files");
    visit("filename", self.filename_, "each window's trace file");
    visit("remote_file_name", self.remote_file_name_, "each window's trace uploaded as (empty: not uploaded)");
    visit("merged_trace_filename", self.merged_trace_filename_, "the node's merged trace (empty: none)");
    visit("merged_trace_remote_file_name", self.merged_trace_remote_file_name_,
          "the merged trace uploaded as (empty: not uploaded)");
    visit("overwrite", self.overwrite_, "allow a non-empty folder");
    visit("num_traces_to_keep", self.num_traces_to_keep_, "window traces kept; -1 all");
  }
  void validate() const;
};

/// Events as Composer writes them: {"name", "cat" (comma-joined categories), "ph" (B/E duration, i instant with
/// "s": "p", C counter, M metadata), "ts" (wall clock, microseconds), "pid" (global rank), "tid" (process id),
/// "args" ({"epoch", "batch"} for durations and instants, the values for counters)}. A window starts at the
/// BATCH_START whose action is not SKIP (with process/thread names, global_rank and clock-sync metadata, after two
/// barriers) and is written at the BATCH_END of its ACTIVE_AND_SAVE batch, atomically (a temporary file renamed).
class JsonTraceHandler : public TraceHandler {
 public:
  explicit JsonTraceHandler(JsonTraceHandlerOptions options = {});

  void init(State& state, Logger& logger) override;
  void batch_start(State& state, Logger& logger) override;
  void batch_end(State& state, Logger& logger) override;
  std::string name() const override { return "JSONTraceHandler"; }

  void process_duration_event(const std::string& name, const std::vector<std::string>& categories, bool is_start,
                              const Timestamp& timestamp, int64_t wall_clock_time_ns) override;
  void process_instant_event(const std::string& name, const std::vector<std::string>& categories,
                             const Timestamp& timestamp, int64_t wall_clock_time_ns) override;
  void process_counter_event(const std::string& name, const std::vector<std::string>& categories,
                             int64_t wall_clock_time_ns, const std::map<std::string, double>& values) override;
  void process_chrome_json_trace_file(const std::string& path, double ts_shift_us) override;

  /// The window traces written so far by this rank (those still kept).
  std::vector<std::string> saved_traces() const;

 private:
  void record(std::string entry);
  void write_window(State& state, Logger& logger);

  JsonTraceHandlerOptions options_;
  std::string folder_;
  mutable std::mutex mutex_;
  std::vector<std::string> queue_;
  bool trace_active_ = false;
  bool save_at_batch_end_ = false;
  std::vector<std::pair<Timestamp, std::vector<std::string>>> saved_;  // every rank's file per window
};

/// Merges Chrome JSON traces (each a list or {"traceEvents": [...]}) written by JsonTraceHandler on several ranks
/// into `output_file` (written atomically): each file's events get its global_rank metadata as pid and are shifted
/// onto the first file's clock by the clock_sync_timestamp_us metadata. Files without that metadata (an earlier
/// merged trace) are copied as they are. Throws std::invalid_argument naming a file that is unreadable or not a
/// trace.
void merge_traces(const std::string& output_file, const std::vector<std::string>& trace_files);

}  // namespace composer
