#include "composer/trainer/microbatch_search.h"

#include "composer/metrics/metric.h"

#include "composer/dist/dist.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#define COMPOSER_HAS_CUDA_ALLOCATOR 1
#endif

#include <new>

namespace composer {
namespace {

bool mentions(const std::string& text, const char* needle) { return text.find(needle) != std::string::npos; }

// The messages LibTorch raises as a plain c10::Error when memory runs out: the CPU allocator (posix_memalign or
// malloc failing), a CUDA call failing with cudaErrorMemoryAllocation outside the caching allocator (cuBLAS and
// cuDNN workspaces), and cuDNN's complaint about large batch-norm inputs that Composer also treats as one.
bool is_allocation_failure_text(const std::string& what) {
  return mentions(what, "DefaultCPUAllocator: can't allocate memory") ||
         mentions(what, "DefaultCPUAllocator: not enough memory") || mentions(what, "CUDA out of memory") ||
         mentions(what, "CUDA error: out of memory") ||
         mentions(what,
                  "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a "
                  "non-contiguous input.");
}

}  // namespace

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  if (dynamic_cast<const std::bad_alloc*>(&e)) return true;
  if (dynamic_cast<const OutOfMemoryOnAnotherRank*>(&e)) return true;
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    return is_allocation_failure_text(c10_error->what_without_backtrace());
  return false;
}

OutOfMemoryOnAnotherRank::OutOfMemoryOnAnotherRank()
    : std::runtime_error("out of memory encountered on a different rank") {}

MicrobatchSearch::MicrobatchSearch(std::string loop, c10::Device device) : loop_(std::move(loop)), device_(device) {}

// One int tensor {out_of_memory, still_in_attempt} reduced with MAX serves both questions in one collective.
void MicrobatchSearch::check_in_attempt() const {
  if (dist::get_world_size() == 1) return;
  at::Tensor flags = at::tensor({0, 1}, at::TensorOptions().dtype(at::kInt)).to(device_);
  dist::all_reduce(flags, dist::ReduceOp::MAX);
  if (flags[0].item<int>() != 0) throw OutOfMemoryOnAnotherRank();
}

bool MicrobatchSearch::any_out_of_memory(bool out_of_memory_here) const {
  if (dist::get_world_size() == 1) return out_of_memory_here;
  bool any = out_of_memory_here;
  for (;;) {
    at::Tensor flags = at::tensor({any ? 1 : 0, 0}, at::TensorOptions().dtype(at::kInt)).to(device_);
    dist::all_reduce(flags, dist::ReduceOp::MAX);
    any = any || flags[0].item<int>() != 0;
    if (flags[1].item<int>() == 0) return any;  // every rank is out of its attempt
  }
}

int64_t MicrobatchSearch::halve(int64_t size, const std::string& loop) {
  if (size <= 1) {
    throw std::runtime_error("automatic microbatching: the " + loop +
                             " loop ran out of memory with a microbatch of 1 sample; not even one sample fits "
                             "(free memory, shrink the model or its inputs, or use a device with more memory)");
  }
  return std::max<int64_t>(size / 2, 1);
}

MetricStates::MetricStates(const MetricMap& metrics) {
  for (const auto& [name, m] : metrics) states_.push_back({m.get(), m->state().clone(), m->rows().clone()});
}

void MetricStates::restore() const {
  for (const auto& saved : states_) {
    saved.metric->set_state(saved.state);
    saved.metric->set_rows(saved.rows);
  }
}

void release_cached_memory(const c10::Device& device) {
#ifdef COMPOSER_HAS_CUDA_ALLOCATOR
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#else
  (void)device;
#endif
}

}  // namespace composer
