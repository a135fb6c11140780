// Image classification data: MNIST / Fashion-MNIST from IDX files, synthetic images, and CPU batch transforms.
#pragma once

#include "composer/data/dataset.h"
#include "composer/data/dataset_loader.h"

#include <memory>
#include <string>
#include <vector>

namespace composer {

/// Images uint8 [N, 1, H, W] ("input") and labels int64 [N] ("target") from a pair of IDX files.
/// `limit` > 0 keeps the first `limit` samples. Throws naming the file when the counts disagree or a label is
/// outside [0, num_classes).
std::shared_ptr<TensorDataset> load_idx_classification(const std::string& images_path, const std::string& labels_path,
                                                       int64_t num_classes = 10, int64_t limit = -1);

/// MNIST-layout folder: {train,t10k}-{images-idx3,labels-idx1}-ubyte, plain or with ".gz" (Fashion-MNIST).
std::shared_ptr<TensorDataset> load_mnist(const std::string& root, bool train, int64_t limit = -1);

/// Random images (float, N(0,1)) whose class is a fixed random linear function of the pixels, for tests/benchmarks.
std::shared_ptr<TensorDataset> synthetic_images(int64_t n, int64_t channels, int64_t size, int64_t num_classes,
                                                uint64_t seed = 0);

/// uint8 or float images [N, C, H, W] -> float ((x / 255 if uint8) - mean[c]) / std[c].
at::Tensor normalize_images(const at::Tensor& images, const std::vector<double>& mean, const std::vector<double>& std);
/// Zero-pads each side by `padding`, then crops a `size` x `size` window at a random offset per image.
at::Tensor random_crop(const at::Tensor& images, int64_t size, int64_t padding, at::Generator& gen);
/// Flips each image left-right with probability p.
at::Tensor random_horizontal_flip(const at::Tensor& images, double p, at::Generator& gen);

struct ImageTransformOptions {
  /// Per-channel mean and std after scaling to [0, 1] (MNIST: 0.1307 / 0.3081).
  TORCH_ARG(std::vector<double>, mean) = std::vector<double>{0.0};
  TORCH_ARG(std::vector<double>, std) = std::vector<double>{1.0};
  /// Random crop with zero padding (0 = off).
  TORCH_ARG(int64_t, crop_padding) = 0;
  TORCH_ARG(bool, horizontal_flip) = false;

 public:
  /// The keys a config sets (repr, hyperparameter logging, read_options).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("mean", self.mean_, "per-channel mean after scaling to [0, 1]");
    visit("std", self.std_, "per-channel std");
    visit("crop_padding", self.crop_padding_, "random crop with this zero padding; 0: off");
    visit("horizontal_flip", self.horizontal_flip_, "random horizontal flips");
  }
};

/// A BatchTransform applying crop, flip (training) and normalize to the batch's "input".
BatchTransform make_image_transform(ImageTransformOptions options);

}  // namespace composer
