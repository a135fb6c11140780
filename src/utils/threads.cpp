#include "composer/utils/threads.h"

#include <ATen/Parallel.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

namespace composer {

int configure_threads(int n) {
  if (n <= 0) {
    if (const char* env = std::getenv("OMP_NUM_THREADS"); env && *env) {
      char* end = nullptr;
      const long v = std::strtol(env, &end, 10);
      if (*end != '\0' || v <= 0) {
        throw std::invalid_argument(std::string("OMP_NUM_THREADS='") + env + "' must be a positive integer");
      }
      n = static_cast<int>(v);
    } else {
      // Ranks started together on one node share its cores.
      const char* local = std::getenv("LOCAL_WORLD_SIZE");
      const unsigned ranks = local && std::atoi(local) > 0 ? static_cast<unsigned>(std::atoi(local)) : 1u;
      n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency() / ranks));
    }
  }
  if (at::get_num_threads() != n) at::set_num_threads(n);
  return at::get_num_threads();
}

}  // namespace composer
