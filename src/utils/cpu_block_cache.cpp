#include "composer/utils/cpu_block_cache.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace composer {
namespace {

constexpr size_t kGranule = size_t{2} << 20;  // block sizes are whole 2 MiB pages (huge-page friendly)

// Large CPU blocks by size, free ones kept for reuse; smaller requests go to the allocator below. A block's data
// pointer is its own context, so LibTorch's raw_allocate/raw_deallocate work with it too.
class BlockCache final : public c10::Allocator {
 public:
  explicit BlockCache(c10::Allocator* below) : below_(below) {}

  c10::DataPtr allocate(size_t n) override {
    if (n < static_cast<size_t>(kCpuBlockCacheMinBytes)) return below_->allocate(n);
    void* p = take((n + kGranule - 1) / kGranule * kGranule);
    return {p, p, &raw_delete, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &raw_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }

  // Takes a freed block back: kept while the cache is held, else given back to the OS. False for a pointer that is
  // not one of ours.
  bool give(void* p) {
    std::unique_lock<std::mutex> lock(mu_);
    const auto it = sizes_.find(p);
    if (it == sizes_.end()) return false;
    const size_t size = it->second;
    sizes_.erase(it);
    live_ -= size;
    report(p, -static_cast<int64_t>(size));
    if (holders_ == 0) {
      lock.unlock();
      c10::free_cpu(p);
      return true;
    }
    cached_ += size;
    free_.emplace(size, p);
    return true;
  }

  void hold() {
    std::lock_guard<std::mutex> lock(mu_);
    ++holders_;
  }
  void drop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--holders_ > 0) return;
    }
    release();
  }

  void release() {
    std::vector<void*> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [size, p] : free_) blocks.push_back(p);
      free_.clear();
      cached_ = 0;
      peak_ = live_;
    }
    for (void* p : blocks) c10::free_cpu(p);
  }

  CpuBlockCacheStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return {static_cast<int64_t>(live_), static_cast<int64_t>(cached_), static_cast<int64_t>(peak_), hits_, misses_};
  }

  c10::Allocator* below() const { return below_; }

 private:
  static void raw_delete(void* p);

  // A block of `size` bytes (a multiple of kGranule): a cached one at most 1/8 larger, else a new one, after giving
  // back cached blocks (the largest first) until live + cached stays within the peak this request makes.
  void* take(size_t size) {
    std::vector<void*> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto it = free_.lower_bound(size);
      if (it != free_.end() && it->first <= size + size / 8) {
        void* p = it->second;
        const size_t got = it->first;
        free_.erase(it);
        cached_ -= got;
        live_ += got;
        sizes_.emplace(p, got);
        ++hits_;
        report(p, static_cast<int64_t>(got));
        return p;
      }
      ++misses_;
      const size_t peak = std::max(peak_, live_ + size);
      while (!free_.empty() && live_ + cached_ + size > peak) {
        const auto last = std::prev(free_.end());
        evicted.push_back(last->second);
        cached_ -= last->first;
        free_.erase(last);
      }
      live_ += size;  // reserved before mapping, so concurrent requests see it
      peak_ = peak;
    }
    for (void* p : evicted) c10::free_cpu(p);
    void* p = map_block(size);
    std::lock_guard<std::mutex> lock(mu_);
    sizes_.emplace(p, size);
    report(p, static_cast<int64_t>(size));
    return p;
  }

  // A new block; when memory runs out, once more after giving back every cached block.
  void* map_block(size_t size) {
    try {
      return c10::alloc_cpu(size);
    } catch (const c10::Error&) {
      release();
    }
    try {
      return c10::alloc_cpu(size);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      live_ -= size;
      throw;
    }
  }

  void report(void* p, int64_t delta) const {  // to the profiler's memory view, as LibTorch's own allocator does
    if (c10::memoryProfilingEnabled())
      c10::reportMemoryUsageToProfiler(p, delta, live_, live_ + cached_, c10::Device(c10::DeviceType::CPU));
  }

  c10::Allocator* below_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;
  std::unordered_map<void*, size_t> sizes_;
  size_t live_ = 0, cached_ = 0, peak_ = 0;
  int64_t hits_ = 0, misses_ = 0;
  int holders_ = 0;
};

std::atomic<BlockCache*> g_cache{nullptr};

void BlockCache::raw_delete(void* p) {
  BlockCache* cache = g_cache.load();
  if (cache->give(p)) return;
  const c10::DeleterFnPtr below = cache->below()->raw_deleter();
  TORCH_INTERNAL_ASSERT(below, "a raw CPU block from an allocator without a raw deleter");
  below(p);
}

// The cache if it is LibTorch's CPU allocator (not when another allocator was set with a higher priority).
BlockCache* active() {
  BlockCache* cache = g_cache.load();
  return cache && c10::GetCPUAllocator() == cache ? cache : nullptr;
}

BlockCache* install() {  // installed once per process
  static std::mutex install_mu;
  std::lock_guard<std::mutex> lock(install_mu);
  if (!g_cache.load()) {
    // Never deleted: tensors may be freed after everything else at exit.
    auto* cache = new BlockCache(c10::GetCPUAllocator());
    g_cache.store(cache);                         // before the first block can be freed
    c10::SetCPUAllocator(cache, /*priority=*/0);  // the priority LibTorch registers its own CPU allocator with
  }
  return active();
}

}  // namespace

bool install_cpu_block_cache() {
  const bool before = g_cache.load() != nullptr;
  return install() != nullptr && !before;
}

std::shared_ptr<void> hold_cpu_block_cache() {
  BlockCache* cache = install();
  if (!cache) return nullptr;
  cache->hold();
  return std::shared_ptr<void>(cache, [](void* c) { static_cast<BlockCache*>(c)->drop(); });
}

bool cpu_block_cache_installed() { return active() != nullptr; }

void release_cpu_block_cache() {
  if (BlockCache* cache = g_cache.load()) cache->release();
}

CpuBlockCacheStats cpu_block_cache_stats() {
  const BlockCache* cache = g_cache.load();
  return cache ? cache->stats() : CpuBlockCacheStats{};
}

}  // namespace composer
