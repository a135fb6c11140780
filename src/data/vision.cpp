#include "composer/data/vision.h"

#include "composer/data/idx.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <stdexcept>

namespace composer {

std::shared_ptr<TensorDataset> load_idx_classification(const std::string& images_path, const std::string& labels_path,
                                                       int64_t num_classes, int64_t limit) {
  at::Tensor images = read_idx(images_path);
  at::Tensor labels = read_idx(labels_path);
  if (images.dim() != 3)
    throw std::runtime_error("IDX file '" + images_path + "' must hold 3-D images, it has " +
                             std::to_string(images.dim()) + " dimensions");
  if (labels.dim() != 1)
    throw std::runtime_error("IDX file '" + labels_path + "' must hold 1-D labels, it has " +
                             std::to_string(labels.dim()) + " dimensions");
  if (images.size(0) != labels.size(0)) {
    throw std::runtime_error("'" + images_path + "' has " + std::to_string(images.size(0)) + " images but '" +
                             labels_path + "' has " + std::to_string(labels.size(0)) + " labels");
  }
  if (images.size(0) == 0) throw std::runtime_error("IDX file '" + images_path + "' holds no images");
  const int64_t max_label = labels.max().item<int64_t>();
  if (max_label >= num_classes) {
    throw std::runtime_error("IDX file '" + labels_path + "' has label " + std::to_string(max_label) +
                             ", outside [0, " + std::to_string(num_classes) + ")");
  }
  if (limit > 0 && limit < images.size(0)) {
    images = images.narrow(0, 0, limit);
    labels = labels.narrow(0, 0, limit);
  }
  return std::make_shared<TensorDataset>(Batch(images.unsqueeze(1).contiguous(), labels.to(at::kLong)));
}

std::shared_ptr<TensorDataset> load_mnist(const std::string& root, bool train, int64_t limit) {
  const std::string prefix = train ? "train" : "t10k";
  auto pick = [&](const std::string& name) {
    const std::filesystem::path plain = std::filesystem::path(root) / name;
    if (std::filesystem::exists(plain)) return plain.string();
    const std::filesystem::path gz = std::filesystem::path(root) / (name + ".gz");
    if (std::filesystem::exists(gz)) return gz.string();
    throw std::runtime_error("MNIST file '" + plain.string() + "' (or .gz) not found; run tools/fetch_data.sh");
  };
  return load_idx_classification(pick(prefix + "-images-idx3-ubyte"), pick(prefix + "-labels-idx1-ubyte"), 10, limit);
}

std::shared_ptr<TensorDataset> synthetic_images(int64_t n, int64_t channels, int64_t size, int64_t num_classes,
                                                uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  at::Tensor x = at::randn({n, channels, size, size}, gen, at::TensorOptions().dtype(at::kFloat));
  at::Tensor w = at::randn({channels * size * size, num_classes}, gen, at::TensorOptions().dtype(at::kFloat));
  at::Tensor y = x.reshape({n, -1}).matmul(w).argmax(1);
  return std::make_shared<TensorDataset>(Batch(x, y));
}

at::Tensor normalize_images(const at::Tensor& images, const std::vector<double>& mean, const std::vector<double>& std) {
  if (images.dim() != 4) throw std::invalid_argument("normalize_images expects [N, C, H, W] images");
  const int64_t c = images.size(1);
  if ((mean.size() != 1 && static_cast<int64_t>(mean.size()) != c) || mean.size() != std.size()) {
    throw std::invalid_argument("normalize_images: mean and std need 1 or " + std::to_string(c) + " entries each");
  }
  at::Tensor x = images.scalar_type() == at::kByte ? images.to(at::kFloat).div_(255.0) : images.to(at::kFloat);
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor m = at::tensor(std::vector<float>(mean.begin(), mean.end()), opts).reshape({1, -1, 1, 1});
  const at::Tensor s = at::tensor(std::vector<float>(std.begin(), std.end()), opts).reshape({1, -1, 1, 1});
  return x.sub_(m).div_(s);
}

at::Tensor random_crop(const at::Tensor& images, int64_t size, int64_t padding, at::Generator& gen) {
  const at::Tensor padded = padding > 0 ? at::constant_pad_nd(images, {padding, padding, padding, padding}, 0) : images;
  const int64_t h = padded.size(2), w = padded.size(3);
  if (size > h || size > w) throw std::invalid_argument("random_crop: crop size larger than the padded image");
  const int64_t n = images.size(0);
  const at::Tensor ys = at::randint(h - size + 1, {n}, gen, at::TensorOptions().dtype(at::kLong));
  const at::Tensor xs = at::randint(w - size + 1, {n}, gen, at::TensorOptions().dtype(at::kLong));
  at::Tensor out = at::empty({n, images.size(1), size, size}, images.options());
  const auto* y = ys.data_ptr<int64_t>();
  const auto* x = xs.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) out[i].copy_(padded[i].narrow(1, y[i], size).narrow(2, x[i], size));
  return out;
}

at::Tensor random_horizontal_flip(const at::Tensor& images, double p, at::Generator& gen) {
  const at::Tensor flip = at::rand({images.size(0)}, gen, at::TensorOptions().dtype(at::kFloat)).lt(p);
  return at::where(flip.reshape({-1, 1, 1, 1}), images.flip({3}), images);
}

BatchTransform make_image_transform(ImageTransformOptions options) {
  return [options](Batch batch, at::Generator& gen) {
    at::Tensor x = batch.input();
    if (options.crop_padding() > 0) x = random_crop(x, x.size(2), options.crop_padding(), gen);
    if (options.horizontal_flip()) x = random_horizontal_flip(x, 0.5, gen);
    batch.set(int64_t{0}, normalize_images(x, options.mean(), options.std()));
    return batch;
  };
}

}  // namespace composer
