#include "composer/models/vision.h"

#include <torch/torch.h>

#include <stdexcept>

namespace composer::models {
namespace {

std::shared_ptr<nn::Sequential> projection(int64_t in, int64_t out, int64_t stride) {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Conv2d>(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
      std::make_shared<nn::BatchNorm2d>(out)});
}

template <class Block>
std::shared_ptr<nn::Sequential> stage(int64_t& in, int64_t channels, int64_t blocks, int64_t stride) {
  auto seq = std::make_shared<nn::Sequential>();
  for (int64_t b = 0; b < blocks; ++b) {
    seq->push_back(std::make_shared<Block>(in, channels, b == 0 ? stride : 1));
    in = channels * Block::kExpansion;
  }
  return seq;
}

// Kaiming-normal conv weights, BatchNorm weight 1 / bias 0 (torchvision's ResNet initialisation).
void init_resnet(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  for (auto& mod : m.modules(/*include_self=*/false)) {
    if (auto* c = dynamic_cast<nn::Conv2d*>(mod.get())) {
      torch::nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
    }
  }
}

}  // namespace

std::shared_ptr<nn::Sequential> mlp(int64_t in, const std::vector<int64_t>& hidden, int64_t classes) {
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Flatten>());
  for (int64_t h : hidden) {
    seq->push_back(std::make_shared<nn::Linear>(in, h));
    seq->push_back(std::make_shared<nn::ReLU>());
    in = h;
  }
  seq->push_back(std::make_shared<nn::Linear>(in, classes));
  return seq;
}

std::shared_ptr<nn::Sequential> mnist_cnn(int64_t in_channels, int64_t num_classes, int64_t width) {
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(in_channels, width, 3).padding(1).bias(false)));
  seq->push_back(std::make_shared<nn::BatchNorm2d>(width));
  seq->push_back(std::make_shared<nn::ReLU>());
  seq->push_back(std::make_shared<nn::MaxPool2d>(2, 2));
  seq->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(width, 2 * width, 3).padding(1).bias(false)));
  seq->push_back(std::make_shared<nn::BatchNorm2d>(2 * width));
  seq->push_back(std::make_shared<nn::ReLU>());
  seq->push_back(std::make_shared<nn::MaxPool2d>(2, 2));
  seq->push_back(std::make_shared<nn::Flatten>());
  seq->push_back(std::make_shared<nn::Linear>(2 * width * 7 * 7, num_classes));
  return seq;
}

BasicBlock::BasicBlock(int64_t in, int64_t channels, int64_t stride) {
  add("conv1", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(in, channels, 3).stride(stride).padding(1).bias(false)));
  add("bn1", std::make_shared<nn::BatchNorm2d>(channels));
  add("conv2", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(channels, channels, 3).padding(1).bias(false)));
  add("bn2", std::make_shared<nn::BatchNorm2d>(channels));
  if (stride != 1 || in != channels) add("downsample", projection(in, channels, stride));
}

ResNetBottleneck::ResNetBottleneck(int64_t in, int64_t channels, int64_t stride) {
  add("conv1", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(in, channels, 1).bias(false)));
  add("bn1", std::make_shared<nn::BatchNorm2d>(channels));
  add("conv2",
      std::make_shared<nn::Conv2d>(nn::Conv2dOptions(channels, channels, 3).stride(stride).padding(1).bias(false)));
  add("bn2", std::make_shared<nn::BatchNorm2d>(channels));
  add("conv3", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(channels, channels * kExpansion, 1).bias(false)));
  add("bn3", std::make_shared<nn::BatchNorm2d>(channels * kExpansion));
  if (stride != 1 || in != channels * kExpansion) add("downsample", projection(in, channels * kExpansion, stride));
}

at::Tensor basic_residual(nn::Composite& b, const at::Tensor& x) {
  const at::Tensor out = at::relu(b.child("bn1").forward(b.child("conv1").forward(x)));
  return b.child("bn2").forward(b.child("conv2").forward(out));
}

at::Tensor bottleneck_residual(nn::Composite& b, const at::Tensor& x) {
  at::Tensor out = at::relu(b.child("bn1").forward(b.child("conv1").forward(x)));
  out = at::relu(b.child("bn2").forward(b.child("conv2").forward(out)));
  return b.child("bn3").forward(b.child("conv3").forward(out));
}

at::Tensor block_shortcut(nn::Composite& b, const at::Tensor& x) {
  return b.has("downsample") ? b.child("downsample").forward(x) : x;
}

at::Tensor BasicBlock::forward(const at::Tensor& x) {
  return at::relu(basic_residual(*this, x) + block_shortcut(*this, x));
}

at::Tensor ResNetBottleneck::forward(const at::Tensor& x) {
  return at::relu(bottleneck_residual(*this, x) + block_shortcut(*this, x));
}

at::Tensor ResNet::forward(const at::Tensor& x) {
  at::Tensor y = at::relu(child("bn1").forward(child("conv1").forward(x)));
  if (imagenet_stem_) y = child("maxpool").forward(y);
  for (const auto& s : stages_) y = child(s).forward(y);
  return child("fc").forward(child("avgpool").forward(y));
}

std::shared_ptr<ResNet> cifar_resnet(int64_t depth, int64_t num_classes, int64_t in_channels) {
  if (depth < 8 || (depth - 2) % 6 != 0) {
    throw std::invalid_argument("cifar_resnet: depth must be 6n + 2 (20, 32, 44, 56, 110), got " +
                                std::to_string(depth));
  }
  const int64_t n = (depth - 2) / 6;
  auto net = std::make_shared<ResNet>();
  net->add("conv1", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(in_channels, 16, 3).padding(1).bias(false)));
  net->add("bn1", std::make_shared<nn::BatchNorm2d>(16));
  int64_t in = 16;
  const int64_t widths[3] = {16, 32, 64};
  for (int i = 0; i < 3; ++i) {
    net->stages_.push_back("layer" + std::to_string(i + 1));
    net->add(net->stages_.back(), stage<BasicBlock>(in, widths[i], n, i == 0 ? 1 : 2));
  }
  net->add("avgpool", std::make_shared<nn::GlobalAvgPool>());
  net->add("fc", std::make_shared<nn::Linear>(in, num_classes));
  init_resnet(*net);
  return net;
}

std::shared_ptr<ResNet> resnet(int64_t depth, int64_t num_classes, int64_t in_channels) {
  std::vector<int64_t> blocks;
  bool bottleneck = depth >= 50;
  switch (depth) {
    case 18:
      blocks = {2, 2, 2, 2};
      break;
    case 34:
      blocks = {3, 4, 6, 3};
      break;
    case 50:
      blocks = {3, 4, 6, 3};
      break;
    case 101:
      blocks = {3, 4, 23, 3};
      break;
    case 152:
      blocks = {3, 8, 36, 3};
      break;
    default:
      throw std::invalid_argument("resnet: depth must be 18, 34, 50, 101 or 152, got " + std::to_string(depth));
  }
  auto net = std::make_shared<ResNet>();
  net->imagenet_stem_ = true;
  net->add("conv1",
           std::make_shared<nn::Conv2d>(nn::Conv2dOptions(in_channels, 64, 7).stride(2).padding(3).bias(false)));
  net->add("bn1", std::make_shared<nn::BatchNorm2d>(64));
  net->add("maxpool", std::make_shared<nn::MaxPool2d>(3, 2, 1));
  int64_t in = 64;
  for (int i = 0; i < 4; ++i) {
    net->stages_.push_back("layer" + std::to_string(i + 1));
    const int64_t stride = i == 0 ? 1 : 2, width = 64 << i;
    net->add(net->stages_.back(), bottleneck ? stage<ResNetBottleneck>(in, width, blocks[i], stride)
                                             : stage<BasicBlock>(in, width, blocks[i], stride));
  }
  net->add("avgpool", std::make_shared<nn::GlobalAvgPool>());
  net->add("fc", std::make_shared<nn::Linear>(in, num_classes));
  init_resnet(*net);
  return net;
}

}  // namespace composer::models
