#include "composer/utils/allocator.h"

#include "composer/utils/cpu_block_cache.h"

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
  // Blocks from the CPU block cache's threshold on are mapped per allocation (and cached by it); smaller ones stay in
  // the heap.
  done = mallopt(M_MMAP_THRESHOLD, static_cast<int>(kCpuBlockCacheMinBytes)) == 1 &&
         mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024) == 1;
  return done;
#else
  return false;
#endif
}

}  // namespace composer
