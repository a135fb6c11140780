#pragma once

namespace composer {

/// Keeps freed tensor memory in the process instead of returning it to the OS after every step (glibc: allocations
/// below 64 MB come from the heap, and up to 256 MB of free heap is kept). glibc's default gives each step's
/// activations back and faults them in again: on the 2-core VM a CNN epoch took 5.0M page faults and 11 s of system
/// time instead of 0.75M and 2 s (bench/results/time_to_accuracy.md). Does nothing when the user configured malloc
/// through GLIBC_TUNABLES or MALLOC_* variables, or off glibc. Returns whether it changed anything.
bool tune_allocator();

}  // namespace composer
