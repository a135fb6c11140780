#include "composer/profiler/system_profiler.h"

#include "composer/callbacks/memory_monitor.h"
#include "composer/profiler/profiler.h"

#include <torch/cuda.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <vector>

namespace composer {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::map<std::string, double> meminfo_bytes() {
  std::map<std::string, double> out;
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (!key.empty() && key.back() == ':') key.pop_back();
    out[key] = kb * 1024.0;
  }
  return out;
}

// Composer's markers: recorded while the schedule warms up or records.
Marker& counter_marker(Profiler& profiler, const std::string& name, const char* category) {
  return profiler.marker(name, {ProfilerAction::WARMUP, ProfilerAction::ACTIVE, ProfilerAction::ACTIVE_AND_SAVE}, false,
                         false, {category});
}

}  // namespace

SystemProfiler::SystemProfiler(Profiler& profiler) : profiler_(profiler) {}

SystemProfiler::~SystemProfiler() { stop(); }

void SystemProfiler::init(State&, Logger&) {
  if (thread_.joinable()) return;
  const auto& o = profiler_.options();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = false;
  }
  sample();  // primes the CPU reading (psutil.cpu_percent() spun once): the first counter covers the time since INIT
  const auto interval = std::chrono::duration<double>(o.sys_prof_stats_thread_interval_seconds());
  thread_ = std::thread([this, interval] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, interval, [this] { return stopping_; })) {
      lock.unlock();
      try {
        sample();
      } catch (...) {  // a sample that cannot be read is skipped, never the run
      }
      lock.lock();
    }
  });
}

void SystemProfiler::close(State&, Logger&) { stop(); }

void SystemProfiler::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SystemProfiler::sample() {
  const auto& o = profiler_.options();
  if (o.sys_prof_cpu()) {
    std::ifstream in("/proc/stat");
    std::string cpu;
    in >> cpu;
    std::vector<double> f;
    double v;
    while (f.size() < 10 && in >> v) f.push_back(v);
    f.resize(10, 0.0);
    // psutil: guest and guest_nice are already in user and nice; idle and iowait are not busy.
    const double total = f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
    const double busy = total - f[3] - f[4];
    const double dt = total - last_cpu_total_, db = busy - last_cpu_busy_;
    const bool first = last_cpu_total_ == 0;
    last_cpu_total_ = total;
    last_cpu_busy_ = busy;
    if (!first) counter_marker(profiler_, "cpu", "cpu").counter({{"cpu_percent", dt > 0 ? 100.0 * db / dt : 0.0}});
  }
  if (o.sys_prof_memory()) {
    if (torch::cuda::is_available()) {
      MemoryMonitor monitor;
      const c10::Device device(c10::DeviceType::CUDA, 0);
      for (const auto& [name, value] : monitor.report(device))
        counter_marker(profiler_, "memory/cuda/" + name, "memory").counter({{name, value}});
    }
    auto m = meminfo_bytes();
    counter_marker(profiler_, "memory/swap", "memory")
        .counter({{"used_gb", (m["SwapTotal"] - m["SwapFree"]) / kGiB}, {"free_gb", m["SwapFree"] / kGiB}});
    double used = m["MemTotal"] - m["MemFree"] - m["Buffers"] - m["Cached"] - m["SReclaimable"];
    if (used < 0) used = m["MemTotal"] - m["MemFree"];
    counter_marker(profiler_, "memory/virtual", "memory")
        .counter({{"used_gb", used / kGiB}, {"available_gb", m["MemAvailable"] / kGiB}});
  }
  if (o.sys_prof_disk()) {
    std::ifstream in("/proc/diskstats");
    for (std::string line; std::getline(in, line);) {
      std::istringstream ls(line);
      int64_t major, minor;
      std::string disk;
      std::vector<double> f;
      ls >> major >> minor >> disk;
      double v;
      while (f.size() < 10 && ls >> v) f.push_back(v);
      if (f.size() < 10) continue;
      // psutil's fields (sectors of 512 bytes).
      const std::vector<std::pair<const char*, double>> fields{
          {"read_count", f[0]}, {"write_count", f[4]}, {"read_bytes", f[2] * 512}, {"write_bytes", f[6] * 512},
          {"read_time", f[3]},  {"write_time", f[7]},  {"busy_time", f[9]}};
      for (const auto& [field, value] : fields)
        counter_marker(profiler_, "disk/" + disk + "/" + field, "disk").counter({{"field_name", value}});
    }
  }
  if (o.sys_prof_net()) {
    std::ifstream in("/proc/net/dev");
    std::string line;
    std::getline(in, line);
    std::getline(in, line);
    while (std::getline(in, line)) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string nic = line.substr(0, colon);
      nic.erase(0, nic.find_first_not_of(' '));
      std::istringstream ls(line.substr(colon + 1));
      std::vector<double> f;
      double v;
      while (f.size() < 9 && ls >> v) f.push_back(v);
      if (f.size() < 9) continue;
      // Composer's numbers: bytes / 2**3.
      counter_marker(profiler_, "network/" + nic + "/kb_sent", "net").counter({{"kb_sent", f[8] / 8}});
      counter_marker(profiler_, "network/" + nic + "/kb_recv", "net").counter({{"kb_recv", f[0] / 8}});
    }
  }
}

}  // namespace composer
