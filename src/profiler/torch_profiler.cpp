#include "composer/profiler/torch_profiler.h"

#include "composer/core/format_name.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/dist/dist.h"
#include "composer/profiler/profiler.h"
#include "composer/utils/atomic_file.h"
#include "composer/utils/error_text.h"
#include "profiler/detail/trace_files.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>
#include <zlib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace composer {
namespace fs = std::filesystem;
namespace {

namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;

std::set<ActivityType> activities() {
  std::set<ActivityType> a{ActivityType::CPU};
  if (torch::cuda::is_available()) a.insert(ActivityType::CUDA);
  return a;
}

std::vector<char> gzip(const std::string& text) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("TorchProfiler: zlib could not start");
  std::vector<char> out(deflateBound(&z, text.size()) + 32);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("TorchProfiler: gzip of the trace failed");
  return out;
}

// Microseconds to add to Kineto's timestamps to put them on the wall clock: its baseTimeNanoseconds (Kineto's
// timestamps count from it), else the wall clock's lead over the steady clock.
double kineto_to_wall_us(const std::string& trace) {
  const nlohmann::json data = nlohmann::json::parse(trace, nullptr, /*allow_exceptions=*/false);
  if (data.is_object() && data.contains("baseTimeNanoseconds") && data["baseTimeNanoseconds"].is_number())
    return data["baseTimeNanoseconds"].get<double>() / 1000.0;
  const auto wall = std::chrono::system_clock::now().time_since_epoch();
  const auto steady = std::chrono::steady_clock::now().time_since_epoch();
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(wall - steady).count()) / 1000.0;
}

}  // namespace

TorchProfiler::TorchProfiler(Profiler& profiler) : profiler_(profiler) {}

TorchProfiler::~TorchProfiler() {
  try {
    stop_recording();
  } catch (...) {
  }
}

void TorchProfiler::init(State& state, Logger&) {
  const auto& o = profiler_.options();
  folder_ = format_name_with_dist(o.torch_prof_folder(), state.run_name);
  detail::prepare_trace_folder(folder_, o.torch_prof_overwrite(), "profiler torch_prof_folder", "torch_prof_overwrite");
  dist::barrier();
}

void TorchProfiler::batch_start(State&, Logger&) {
  const ProfilerAction action = profiler_.action();
  const bool active = action == ProfilerAction::ACTIVE || action == ProfilerAction::ACTIVE_AND_SAVE;
  if (active && !recording_) {
    const auto& o = profiler_.options();
    const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO,
                                                       o.torch_prof_record_shapes(), o.torch_prof_profile_memory(),
                                                       o.torch_prof_with_stack(), o.torch_prof_with_flops());
    try {
      kineto::prepareProfiler(config, activities());
      kineto::enableProfiler(config, activities());
    } catch (const std::exception& e) {
      throw std::runtime_error("TorchProfiler: LibTorch's profiler could not start (is another profiler running?): " +
                               brief_error_text(e.what()));
    }
    recording_ = true;
  }
  save_at_batch_end_ = recording_ && action == ProfilerAction::ACTIVE_AND_SAVE;
}

void TorchProfiler::batch_end(State& state, Logger& logger) {
  if (!save_at_batch_end_) return;
  save_at_batch_end_ = false;
  recording_ = false;
  auto result = kineto::disableProfiler();
  const auto& o = profiler_.options();
  std::string name = format_name(o.torch_prof_filename(), state);
  if (o.torch_prof_use_gzip() && !detail::ends_with_gz(name)) name += ".gz";
  const fs::path path = fs::path(folder_) / name;
  fs::create_directories(path.parent_path());
  const fs::path raw = path.string() + ".kineto.tmp";
  result->save(raw.string());
  std::ifstream in(raw, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  in.close();
  std::error_code ec;
  fs::remove(raw, ec);
  const std::string text = ss.str();
  if (text.empty()) throw std::runtime_error("TorchProfiler: LibTorch's profiler wrote no trace to " + raw.string());
  const double shift = kineto_to_wall_us(text);
  write_file_atomically(path.string(),
                        o.torch_prof_use_gzip() ? gzip(text) : std::vector<char>(text.begin(), text.end()));
  profiler_.record_chrome_json_trace_file(path.string(), shift);
  if (!o.torch_prof_remote_file_name().empty()) {
    std::string remote = format_name(o.torch_prof_remote_file_name(), state);
    if (o.torch_prof_use_gzip() && !detail::ends_with_gz(remote)) remote += ".gz";
    logger.upload_file(remote, path.string(), o.torch_prof_overwrite());
  }
  saved_.push_back(path.string());
  if (o.torch_prof_num_traces_to_keep() >= 0) {
    while (saved_.size() > static_cast<size_t>(o.torch_prof_num_traces_to_keep())) {
      fs::remove(saved_.front(), ec);
      saved_.erase(saved_.begin());
    }
  }
}

void TorchProfiler::close(State&, Logger&) { stop_recording(); }

void TorchProfiler::stop_recording() {
  if (!recording_) return;
  recording_ = false;
  kineto::disableProfiler();  // a window cut short (the run ended or failed mid-window) is dropped
}

}  // namespace composer
