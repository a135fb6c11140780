#pragma once

#include <cstdint>
#include <memory>

namespace composer {

/// CPU tensor blocks of at least this many bytes go through the block cache (the same size from which the tuned
/// glibc malloc maps memory per allocation; smaller blocks come from its heap, which keeps them).
inline constexpr int64_t kCpuBlockCacheMinBytes = int64_t{64} << 20;

/// What the CPU block cache holds now.
struct CpuBlockCacheStats {
  int64_t live_bytes = 0;    ///< large blocks that tensors hold
  int64_t cached_bytes = 0;  ///< large blocks that tensors freed, kept for the next allocation of their size
  int64_t peak_bytes = 0;    ///< the most live_bytes so far (since the last release); live + cached never exceeds it
  int64_t hits = 0;          ///< allocations served from the cache
  int64_t misses = 0;        ///< allocations that mapped a new block
};

/// Routes LibTorch's CPU allocations of kCpuBlockCacheMinBytes and more through a cache that, while it is held
/// (hold_cpu_block_cache), keeps freed blocks and hands them to the next allocation of about their size (at most 1/8
/// larger), as the CUDA caching allocator does on a GPU. A step that allocates the same large tensors every time (an
/// LM's 2048 x 50257 logits, their softmax and gradients: 412 MB each) otherwise maps and unmaps them on every step
/// and faults all their pages in again: on the 2-core VM the LM recipe's step took 1.26 s, most of the difference
/// system time, against 0.77 s with the cache (bench/results/lm_recipe.md). The cache never holds more than the
/// largest amount of such blocks the process had in use at once (live + cached <= peak): a request that finds no
/// block of its size first gives cached ones back until that holds. Smaller blocks go to the allocator installed
/// before. Installs once per process; returns whether this call installed it.
bool install_cpu_block_cache();

/// Whether the cache is LibTorch's CPU allocator in this process.
bool cpu_block_cache_installed();

/// Keeps freed large blocks for reuse while the returned handle (or a copy of it) lives; while no handle lives, a
/// freed block goes back to the OS at once, as without the cache, so one-off phases (building and loading a model)
/// hold no more memory than before. When the last handle goes, every cached block goes back. Installs the cache if
/// needed. The Trainer holds it from its first fit(), eval() or predict() until it closes, when its
/// `tune_allocator` option is on (the default).
std::shared_ptr<void> hold_cpu_block_cache();

/// Gives every cached block back to the OS and restarts the peak from what is live. Safe to call at any time.
void release_cpu_block_cache();

CpuBlockCacheStats cpu_block_cache_stats();

}  // namespace composer
