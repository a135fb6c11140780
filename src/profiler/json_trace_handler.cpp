#include "composer/profiler/json_trace_handler.h"

#include "composer/core/format_name.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/dist/dist.h"
#include "composer/dist/env.h"
#include "composer/profiler/profiler.h"
#include "profiler/detail/trace_files.h"
#include "utils/detail/text_file.h"

#include <unistd.h>
#include <zlib.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace composer {
namespace fs = std::filesystem;
namespace {

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

nlohmann::json event(const std::string& name, const std::string& cat, const char* ph, int64_t wall_ns) {
  return {{"name", name},
          {"cat", cat},
          {"ph", ph},
          {"ts", wall_ns / 1000},
          {"pid", dist::get_global_rank()},
          {"tid", static_cast<int64_t>(::getpid())}};
}

// A file's text, gunzipped when it ends in .gz.
std::string read_text(const std::string& path) {
  if (detail::ends_with_gz(path)) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (!f) throw std::invalid_argument("trace file " + path + ": cannot be opened");
    std::string out;
    char buf[1 << 16];
    int n;
    while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    gzclose(f);
    if (n < 0) throw std::invalid_argument("trace file " + path + ": not a readable gzip file");
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("trace file " + path + ": cannot be opened");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The events of a Chrome JSON trace: a list (its closing bracket may be missing, as the format allows) or an object
// with "traceEvents".
nlohmann::json trace_events(const std::string& path) {
  std::string text = read_text(path);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[' && text.back() != ']') text += "]";
  nlohmann::json data = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (data.is_discarded()) throw std::invalid_argument("trace file " + path + ": not JSON");
  if (data.is_object() && data.contains("traceEvents")) data = data["traceEvents"];
  if (!data.is_array()) {
    throw std::invalid_argument("trace file " + path + ": expected a list of events or {\"traceEvents\": [...]}");
  }
  return data;
}

std::string lines_of(const std::vector<std::string>& entries) {
  std::string out = "[\n";
  for (size_t i = 0; i < entries.size(); ++i) out += (i ? ",\n" : "") + entries[i];
  out += "\n]\n";
  return out;
}

const nlohmann::json* metadata(const nlohmann::json& events, const std::string& name) {
  for (const auto& e : events)
    if (e.is_object() && e.value("ph", "") == "M" && e.value("name", "") == name && e.contains("args") &&
        e["args"].contains("value"))
      return &e["args"]["value"];
  return nullptr;
}

}  // namespace

void JsonTraceHandlerOptions::validate() const {
  if (folder_.empty()) throw std::invalid_argument("JSONTraceHandler folder: must not be empty");
  if (filename_.empty()) throw std::invalid_argument("JSONTraceHandler filename: must not be empty");
  if (num_traces_to_keep_ < -1) {
    throw std::invalid_argument("JSONTraceHandler num_traces_to_keep: must be -1 (keep all) or >= 0 (got " +
                                std::to_string(num_traces_to_keep_) + ")");
  }
}

JsonTraceHandler::JsonTraceHandler(JsonTraceHandlerOptions options) : options_(std::move(options)) {
  options_.validate();
}

void JsonTraceHandler::init(State& state, Logger&) {
  profiler();  // a clear error when the handler was given as a plain callback
  folder_ = format_name_with_dist(options_.folder(), state.run_name);
  detail::prepare_trace_folder(folder_, options_.overwrite(), "JSONTraceHandler folder", "overwrite");
  std::error_code ec;
  if (!options_.merged_trace_filename().empty()) {
    fs::remove(fs::path(folder_) / format_name_with_dist(options_.merged_trace_filename(), state.run_name), ec);
  }
  dist::barrier();
}

void JsonTraceHandler::batch_start(State&, Logger&) {
  const ProfilerAction action = profiler().action();
  if (action != ProfilerAction::SKIP && !trace_active_) {
    const int64_t rank = dist::get_global_rank();
    const int64_t wall = detail::wall_clock_ns();
    auto meta = [&](const char* name, nlohmann::json args) {
      nlohmann::json e = event(name, "", "M", wall);
      e["args"] = std::move(args);
      record(e.dump());
    };
    meta("process_name", {{"name", "Rank " + std::to_string(rank) + " training loop process"}});
    meta("thread_name", {{"name", "Training Loop"}});
    meta("thread_sort_index", {{"sort_index", 0}});
    meta("global_rank", {{"value", rank}});
    meta("process_sort_index", {{"sort_index", rank}});
    // Every rank reads its clock between the same two barriers; the merge aligns the ranks' clocks by it.
    const int64_t sync_a = detail::wall_clock_ns();
    dist::barrier();
    const int64_t sync = detail::wall_clock_ns();
    dist::barrier();
    const int64_t sync_b = detail::wall_clock_ns();
    meta("clock_sync_timestamp_us", {{"value", sync / 1000}});
    meta("clock_sync_error_bound", {{"value", (sync_b - sync_a) / 1000}});
    trace_active_ = true;
  }
  if (action == ProfilerAction::ACTIVE_AND_SAVE) save_at_batch_end_ = true;
}

void JsonTraceHandler::batch_end(State& state, Logger& logger) {
  if (!save_at_batch_end_) return;
  write_window(state, logger);
  trace_active_ = false;
  save_at_batch_end_ = false;
}

void JsonTraceHandler::write_window(State& state, Logger& logger) {
  const std::string path = (fs::path(folder_) / format_name(options_.filename(), state)).string();
  std::vector<std::string> entries;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries.swap(queue_);
  }
  fs::create_directories(fs::path(path).parent_path());
  composer::detail::write_text_atomically(path, lines_of(entries));
  if (!options_.remote_file_name().empty()) {
    logger.upload_file(format_name(options_.remote_file_name(), state), path, options_.overwrite());
  }
  const std::vector<std::string> files = dist::all_gather_object(path);
  saved_.emplace_back(state.timestamp, files);
  dist::barrier();
  if (!options_.merged_trace_filename().empty() && dist::get_local_rank() == 0) {
    const std::string merged =
        (fs::path(folder_) / format_name_with_dist(options_.merged_trace_filename(), state.run_name)).string();
    std::vector<std::string> inputs;
    if (fs::exists(merged)) inputs.push_back(merged);
    const auto start = static_cast<size_t>(dist::get_global_rank());
    const auto end = std::min(files.size(), start + static_cast<size_t>(dist::get_local_world_size()));
    for (size_t r = start; r < end; ++r) inputs.push_back(files[r]);
    merge_traces(merged, inputs);
    if (!options_.merged_trace_remote_file_name().empty()) {
      logger.upload_file(format_name_with_dist(options_.merged_trace_remote_file_name(), state.run_name), merged,
                         /*overwrite=*/true);
    }
  }
  if (options_.num_traces_to_keep() >= 0) {
    while (saved_.size() > static_cast<size_t>(options_.num_traces_to_keep())) {
      const auto& old = saved_.front().second;
      const auto rank = static_cast<size_t>(dist::get_global_rank());
      std::error_code ec;
      if (rank < old.size()) fs::remove(old[rank], ec);
      saved_.erase(saved_.begin());
    }
  }
}

std::vector<std::string> JsonTraceHandler::saved_traces() const {
  std::vector<std::string> out;
  const auto rank = static_cast<size_t>(dist::get_global_rank());
  for (const auto& [t, files] : saved_)
    if (rank < files.size()) out.push_back(files[rank]);
  return out;
}

void JsonTraceHandler::record(std::string entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.push_back(std::move(entry));
}

void JsonTraceHandler::process_duration_event(const std::string& name, const std::vector<std::string>& categories,
                                              bool is_start, const Timestamp& t, int64_t wall_ns) {
  nlohmann::json e = event(name, join(categories), is_start ? "B" : "E", wall_ns);
  e["args"] = {{"epoch", t.epoch}, {"batch", t.batch}};
  record(e.dump());
}

void JsonTraceHandler::process_instant_event(const std::string& name, const std::vector<std::string>& categories,
                                             const Timestamp& t, int64_t wall_ns) {
  nlohmann::json e = event(name, join(categories), "i", wall_ns);
  e["args"] = {{"epoch", t.epoch}, {"batch", t.batch}};
  e["s"] = "p";
  record(e.dump());
}

void JsonTraceHandler::process_counter_event(const std::string& name, const std::vector<std::string>& categories,
                                             int64_t wall_ns, const std::map<std::string, double>& values) {
  nlohmann::json e = event(name, join(categories), "C", wall_ns);
  e["args"] = values;
  record(e.dump());
}

void JsonTraceHandler::process_chrome_json_trace_file(const std::string& path, double ts_shift_us) {
  const nlohmann::json events = trace_events(path);
  const int64_t rank = dist::get_global_rank();
  for (nlohmann::json e : events) {
    if (!e.is_object()) continue;
    e["pid"] = rank;
    if (e.contains("ts") && e["ts"].is_number()) e["ts"] = e["ts"].get<double>() + ts_shift_us;
    record(e.dump());
  }
}

void merge_traces(const std::string& output_file, const std::vector<std::string>& trace_files) {
  struct Input {
    nlohmann::json events;
    const nlohmann::json* rank = nullptr;
    const nlohmann::json* sync = nullptr;
  };
  std::vector<Input> inputs;
  for (const auto& f : trace_files) {
    Input in{trace_events(f)};
    in.rank = metadata(in.events, "global_rank");
    in.sync = metadata(in.events, "clock_sync_timestamp_us");
    inputs.push_back(std::move(in));
  }
  const nlohmann::json* reference = nullptr;
  for (const auto& in : inputs)
    if (in.sync && !reference) reference = in.sync;
  std::vector<std::string> out;
  std::map<int64_t, std::set<std::string>> seen_threads;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Input& in = inputs[i];
    const bool aligned = in.rank && in.sync;  // a window file; else an earlier merged trace, copied as it is
    const int64_t rank = aligned ? in.rank->get<int64_t>() : 0;
    const double diff = aligned ? reference->get<double>() - in.sync->get<double>() : 0.0;
    for (nlohmann::json e : in.events) {
      if (!e.is_object() || !e.contains("pid") || !e.contains("tid")) continue;
      if (!aligned) {
        out.push_back(e.dump());
        continue;
      }
      if (e["tid"].dump().find("PyTorch Profiler") != std::string::npos) continue;
      if (e.contains("ts") && e["ts"].is_number()) e["ts"] = e["ts"].get<double>() + diff;
      e["pid"] = rank;
      if (seen_threads[rank].insert(e["tid"].dump()).second) {
        out.push_back(nlohmann::json{{"name", "thread_sort_index"},
                                     {"ph", "M"},
                                     {"pid", rank},
                                     {"tid", e["tid"]},
                                     {"args", {{"sort_index", 99999}}}}
                          .dump());
      }
      out.push_back(e.dump());
    }
  }
  composer::detail::write_text_atomically(output_file, lines_of(out));
}

}  // namespace composer
