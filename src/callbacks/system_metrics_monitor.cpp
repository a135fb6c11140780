#include "composer/callbacks/system_metrics_monitor.h"

#include "composer/core/logger.h"

#include <sys/statvfs.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

namespace composer {

namespace {

double round1(double v) { return std::round(v * 10.0) / 10.0; }

/// (total, busy) CPU time of the "cpu" line of /proc/stat, as psutil counts them: the sum without guest and
/// guest_nice (already in user and nice), busy without idle and iowait.
std::array<double, 2> cpu_times() {
  std::ifstream in("/proc/stat");
  std::string label;
  in >> label;
  std::vector<double> t;
  for (double v; t.size() < 10 && in >> v;) t.push_back(v);
  t.resize(10, 0.0);
  double total = 0;
  for (double v : t) total += v;
  total -= t[8] + t[9];
  return {total, total - t[3] - t[4]};
}

void add_memory(std::map<std::string, double>& out) {
  std::map<std::string, double> m;
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    double kb = 0;
    if (fields >> key >> kb) m[key] = kb * 1024.0;
  }
  const auto get = [&](const char* k) { return m.count(k) ? m[k] : 0.0; };
  const double total = get("MemTotal:"), free = get("MemFree:");
  double avail = get("MemAvailable:");
  if (avail > total) avail = free;
  out["cpu_memory_total"] = total;
  out["cpu_memory_available"] = avail;
  out["cpu_memory_percent"] = total > 0 ? round1((total - avail) / total * 100.0) : 0.0;
  out["cpu_memory_used"] = total - avail;
  out["cpu_memory_free"] = free;
  out["cpu_memory_active"] = get("Active:");
  out["cpu_memory_inactive"] = get("Inactive:");
  out["cpu_memory_buffers"] = get("Buffers:");
  out["cpu_memory_cached"] = get("Cached:") + get("SReclaimable:");
  out["cpu_memory_shared"] = get("Shmem:");
  out["cpu_memory_slab"] = get("Slab:");
}

void add_disk(std::map<std::string, double>& out) {
  struct statvfs st {};
  if (::statvfs("/", &st) != 0) return;
  const double frsize = static_cast<double>(st.f_frsize);
  const double total = static_cast<double>(st.f_blocks) * frsize;
  const double avail_to_root = static_cast<double>(st.f_bfree) * frsize;
  const double avail_to_user = static_cast<double>(st.f_bavail) * frsize;
  const double used = total - avail_to_root;
  out["disk_memory_total"] = total;
  out["disk_memory_used"] = used;
  out["disk_memory_free"] = avail_to_user;
  out["disk_memory_percent"] = used + avail_to_user > 0 ? round1(used / (used + avail_to_user) * 100.0) : 0.0;
}

void add_network(std::map<std::string, double>& out) {
  static const char* names[] = {"bytes_recv", "packets_recv", "errin",      "dropin",       nullptr,  nullptr,
                                nullptr,      nullptr,        "bytes_sent", "packets_sent", "errout", "dropout"};
  double sums[12] = {};
  std::ifstream in("/proc/net/dev");
  std::string line;
  std::getline(in, line);
  std::getline(in, line);  // two header lines
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream fields(line.substr(colon + 1));
    for (double& s : sums) {
      double v = 0;
      if (fields >> v) s += v;
    }
  }
  for (int i = 0; i < 12; ++i)
    if (names[i]) out[std::string("network_") + names[i]] = sums[i];
}

}  // namespace

SystemMetricsMonitor::SystemMetricsMonitor(SystemMetricsMonitorOptions options) : options_(options) {}

std::map<std::string, double> SystemMetricsMonitor::compute_system_metrics() {
  std::map<std::string, double> out;
  const auto now = cpu_times();
  const auto before = have_cpu_ ? last_cpu_ : now;
  last_cpu_ = now;
  have_cpu_ = true;
  const double all = now[0] - before[0], busy = now[1] - before[1];
  out["cpu_percentage"] = all > 0 ? round1(busy / all * 100.0) : 0.0;
  add_memory(out);
  add_disk(out);
  add_network(out);
  return out;
}

void SystemMetricsMonitor::batch_start(State&, Logger& logger) { logger.log_metrics(compute_system_metrics()); }
void SystemMetricsMonitor::eval_batch_start(State&, Logger& logger) { logger.log_metrics(compute_system_metrics()); }
void SystemMetricsMonitor::predict_batch_start(State&, Logger& logger) { logger.log_metrics(compute_system_metrics()); }

}  // namespace composer
