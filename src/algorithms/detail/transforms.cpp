#include "algorithms/detail/transforms.h"

#include "composer/core/state.h"
#include "composer/utils/type_name.h"

#include <torch/torch.h>

namespace composer::algorithms::detail {

BatchTransform per_image_transform(std::function<at::Tensor(const at::Tensor& image, at::Generator& gen)> fn) {
  return [fn = std::move(fn)](Batch batch, at::Generator& gen) {
    const at::Tensor input = batch.at(int64_t{0});
    std::vector<at::Tensor> images;
    images.reserve(static_cast<size_t>(input.size(0)));
    for (int64_t i = 0; i < input.size(0); ++i) images.push_back(fn(input[i], gen));
    batch.set(int64_t{0}, at::stack(images));
    return batch;
  };
}

void add_train_transform(State& state, const std::string& algorithm, BatchTransform transform) {
  if (!state.train_dataloader) {
    throw std::invalid_argument(algorithm + ": there is no training dataloader to add the transform to");
  }
  auto* loader = dynamic_cast<DatasetLoader*>(state.train_dataloader.get());
  if (!loader) {
    throw std::invalid_argument(algorithm + ": the training dataloader is a " + class_name_of(*state.train_dataloader) +
                                "; adding a per-sample transform needs a composer::DatasetLoader (or add the "
                                "functional transform to your own loader)");
  }
  loader->prepend_transform(std::move(transform));
}

}  // namespace composer::algorithms::detail
