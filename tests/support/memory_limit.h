// A real memory limit for out-of-memory tests and benchmarks: caps this process's address space (RLIMIT_AS) at
// what it maps now plus a budget, so LibTorch's CPU allocator fails as it does on a full machine.
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>

namespace composer::testing {

/// This process's mapped address space (VmSize), in bytes.
inline int64_t mapped_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7)) * 1024;  // "VmSize:  123 kB"
  throw std::runtime_error("no VmSize in /proc/self/status");
}

/// Lets the process map `budget_bytes` more than it has mapped now, and no more.
inline void limit_address_space(int64_t budget_bytes) {
  rlimit r{};
  ::getrlimit(RLIMIT_AS, &r);
  r.rlim_cur = static_cast<rlim_t>(mapped_bytes() + budget_bytes);
  if (::setrlimit(RLIMIT_AS, &r) != 0) throw std::runtime_error("setrlimit(RLIMIT_AS) failed");
}

}  // namespace composer::testing
