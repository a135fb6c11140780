#include "trainer/detail/captured_step.h"

#include "composer/utils/error_text.h"

#include <ATen/autocast_mode.h>

#include <stdexcept>

#if __has_include(<ATen/cuda/CUDAGraph.h>) && __has_include(<cuda_runtime_api.h>)
#define COMPOSER_HAS_CUDA_GRAPHS 1
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#else
#define COMPOSER_HAS_CUDA_GRAPHS 0
#endif

namespace composer::detail {
namespace {

#if !COMPOSER_HAS_CUDA_GRAPHS
[[noreturn]] void no_cuda_graphs() {
  throw std::runtime_error("cuda_graph: this LibTorch is built without CUDA, so it cannot record CUDA graphs");
}
#endif

// Autocast caches each weight's low-precision copy for the length of one autocast region; a recorded cast must
// be redone at every replay, so recording runs with the cache off (as torch.cuda.graph asks).
class AutocastCacheOff {
 public:
  AutocastCacheOff() : was_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~AutocastCacheOff() { at::autocast::set_autocast_cache_enabled(was_); }
  AutocastCacheOff(const AutocastCacheOff&) = delete;
  AutocastCacheOff& operator=(const AutocastCacheOff&) = delete;

 private:
  bool was_;
};

}  // namespace

struct CapturedStep::Impl {
#if COMPOSER_HAS_CUDA_GRAPHS
  at::cuda::CUDAGraph graph;
#endif
  Batch inputs;
  bool recorded = false;
};

CapturedStep::CapturedStep() : impl_(std::make_unique<Impl>()) {}
CapturedStep::~CapturedStep() = default;

bool CapturedStep::recorded() const { return impl_->recorded; }

bool CapturedStep::fits(const Batch& batch) const {
  const auto& mine = impl_->inputs.fields();
  const auto& theirs = batch.fields();
  if (mine.size() != theirs.size()) return false;
  for (size_t i = 0; i < mine.size(); ++i) {
    const at::Tensor& a = mine[i].second;
    const at::Tensor& b = theirs[i].second;
    if (mine[i].first != theirs[i].first || a.defined() != b.defined()) return false;
    if (a.defined() && (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type() || a.device() != b.device()))
      return false;
  }
  return true;
}

void CapturedStep::on_side_stream(const c10::Device& device, const std::function<void()>& fn) {
#if COMPOSER_HAS_CUDA_GRAPHS
  c10::cuda::device_synchronize();
  {
    c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool(false, device.index()));
    fn();
  }
  c10::cuda::device_synchronize();
#else
  (void)device;
  (void)fn;
  no_cuda_graphs();
#endif
}

void CapturedStep::record(const Batch& batch, const std::function<void(const Batch& static_batch)>& body) {
#if COMPOSER_HAS_CUDA_GRAPHS
  std::vector<std::pair<std::string, at::Tensor>> fields;
  for (const auto& [name, t] : batch.fields()) fields.emplace_back(name, t.defined() ? t.clone() : t);
  impl_->inputs = Batch(std::move(fields));
  const c10::Device device = batch.fields().empty() ? c10::Device(c10::kCUDA) : batch.fields().front().second.device();
  c10::cuda::device_synchronize();
  const c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool(false, device.index());
  {
    c10::cuda::CUDAStreamGuard guard(stream);
    AutocastCacheOff cache_off;
    bool capturing = false;
    try {
      impl_->graph.capture_begin();
      capturing = true;
      body(impl_->inputs);
      capturing = false;
      impl_->graph.capture_end();
    } catch (const std::exception& e) {
      if (capturing) {  // end the stream's capture so the error below is the one the user sees
        cudaGraph_t partial = nullptr;
        (void)cudaStreamEndCapture(stream.stream(), &partial);
        if (partial) (void)cudaGraphDestroy(partial);
        (void)cudaGetLastError();
      }
      throw std::runtime_error(
          "cuda_graph: recording the train step failed: " + brief_error(e) +
          ". Work in the model's forward or losses, the backward or the optimizer step waited for the host (.item(), "
          "a branch on a tensor's value, a CPU tensor); remove it or set cuda_graph: false");
    }
  }
  c10::cuda::device_synchronize();
  impl_->recorded = true;
#else
  (void)batch;
  (void)body;
  no_cuda_graphs();
#endif
}

void CapturedStep::replay(const Batch& batch) {
#if COMPOSER_HAS_CUDA_GRAPHS
  const auto& from = batch.fields();
  auto& to = impl_->inputs;
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i].second.defined()) to.at(static_cast<int64_t>(i)).copy_(from[i].second, /*non_blocking=*/true);
  impl_->graph.replay();
#else
  (void)batch;
  no_cuda_graphs();
#endif
}

}  // namespace composer::detail
