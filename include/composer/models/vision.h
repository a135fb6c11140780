// Vision models, all surgery-ready (built from composer::nn::Composite), with torchvision's parameter names.
#pragma once

#include "composer/nn/layers.h"

#include <memory>
#include <vector>

namespace composer::models {

/// in -> hidden[0] -> ... -> classes, ReLU between.
std::shared_ptr<nn::Sequential> mlp(int64_t in_features, const std::vector<int64_t>& hidden, int64_t num_classes);

/// A small CNN for 28x28 images: 2 x (conv3x3 + BatchNorm + ReLU + maxpool), then a linear classifier.
/// Flattens nothing itself: input [N, C, 28, 28].
std::shared_ptr<nn::Sequential> mnist_cnn(int64_t in_channels = 1, int64_t num_classes = 10, int64_t width = 32);

/// conv3x3-BN-ReLU-conv3x3-BN plus the (projected) input, then ReLU.
class BasicBlock : public nn::Composite {
 public:
  BasicBlock(int64_t in_channels, int64_t channels, int64_t stride);
  at::Tensor forward(const at::Tensor& x) override;
  static constexpr int64_t kExpansion = 1;
};

/// 1x1 - 3x3 - 1x1 (x4) bottleneck; Composer's StochasticDepth targets this class by name.
class ResNetBottleneck : public nn::Composite {
 public:
  ResNetBottleneck(int64_t in_channels, int64_t channels, int64_t stride);
  at::Tensor forward(const at::Tensor& x) override;
  static constexpr int64_t kExpansion = 4;
};

/// The two halves of a residual block built with BasicBlock's or ResNetBottleneck's child names, for blocks that
/// recombine them differently (StochasticDepth): relu(residual(x) + shortcut(x)) is the plain block.
at::Tensor basic_residual(nn::Composite& block, const at::Tensor& x);
at::Tensor bottleneck_residual(nn::Composite& block, const at::Tensor& x);
/// downsample(x) when the block has a "downsample" child, else x.
at::Tensor block_shortcut(nn::Composite& block, const at::Tensor& x);

/// conv1, bn1, [maxpool], layer1..layerN (Sequentials of blocks), global average pool, fc.
class ResNet : public nn::Composite {
 public:
  at::Tensor forward(const at::Tensor& x) override;

 private:
  friend std::shared_ptr<ResNet> cifar_resnet(int64_t, int64_t, int64_t);
  friend std::shared_ptr<ResNet> resnet(int64_t, int64_t, int64_t);
  std::vector<std::string> stages_;
  bool imagenet_stem_ = false;
};

/// CIFAR-style ResNet-20/32/44/56/110 (depth = 6n + 2; 16-32-64 channels).
std::shared_ptr<ResNet> cifar_resnet(int64_t depth, int64_t num_classes = 10, int64_t in_channels = 3);
/// ImageNet-style ResNet-18/34 (BasicBlock) or 50/101/152 (ResNetBottleneck).
std::shared_ptr<ResNet> resnet(int64_t depth, int64_t num_classes = 1000, int64_t in_channels = 3);

}  // namespace composer::models
