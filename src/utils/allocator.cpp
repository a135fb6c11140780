#include "composer/utils/allocator.h"

#include <cstdlib>
#include <cstring>

#include <unistd.h>  // environ
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace composer {

bool tune_allocator() {
#if defined(__GLIBC__)
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "GLIBC_TUNABLES=", 15) == 0 || std::strncmp(*e, "MALLOC_", 7) == 0) return false;
  }
  static bool done = false;
  if (done) return true;
  done = mallopt(M_MMAP_THRESHOLD, 64 * 1024 * 1024) == 1 && mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024) == 1;
  return done;
#else
  return false;
#endif
}

}  // namespace composer
