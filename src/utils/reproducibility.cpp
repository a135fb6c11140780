#include "composer/utils/reproducibility.h"

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <mutex>

namespace composer {
namespace {

at::Generator cuda_generator(size_t index) {
  return at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index)));
}

}  // namespace

void seed_all(uint64_t seed) {
  torch::manual_seed(seed);  // the CPU generator, and the CUDA generators when CUDA is there
  if (torch::cuda::is_available()) torch::cuda::manual_seed_all(seed);
}

GeneratorStates GeneratorStates::capture() {
  GeneratorStates s;
  s.cpu = at::detail::getDefaultCPUGenerator().get_state();
  if (torch::cuda::is_available()) {
    for (size_t i = 0; i < static_cast<size_t>(torch::cuda::device_count()); ++i)
      s.cuda.push_back(cuda_generator(i).get_state());
  }
  return s;
}

void GeneratorStates::restore() const {
  auto put = [](at::Generator gen, const at::Tensor& state) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  };
  put(at::detail::getDefaultCPUGenerator(), cpu);
  if (cuda.empty() || !torch::cuda::is_available()) return;
  const size_t devices = static_cast<size_t>(torch::cuda::device_count());
  for (size_t i = 0; i < cuda.size() && i < devices; ++i) put(cuda_generator(i), cuda[i]);
}

}  // namespace composer
