#include "composer/dist/env.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace composer::dist {
namespace {

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (*end != '\0' || x < 0) {
    throw std::invalid_argument(std::string("environment variable ") + name + "='" + v +
                                "' must be a non-negative integer");
  }
  return x;
}

}  // namespace

int64_t get_global_rank() { return env_int("RANK", 0); }
int64_t get_world_size() { return env_int("WORLD_SIZE", 1); }
int64_t get_local_rank() { return env_int("LOCAL_RANK", 0); }
int64_t get_local_world_size() { return env_int("LOCAL_WORLD_SIZE", 1); }
// NODE_RANK (composer-cpp launch, Composer's launcher), else GROUP_RANK (torchrun).
int64_t get_node_rank() { return env_int("NODE_RANK", env_int("GROUP_RANK", 0)); }

}  // namespace composer::dist
