// Image operations (PIL semantics on tensors), AugMix and RandAugment.
#include "algorithms/algo_support.h"

#include <gtest/gtest.h>

using namespace composer;
using namespace composer::functional;

namespace {
at::Tensor u8(const at::Tensor& t) { return t.to(at::kByte); }
}  // namespace

TEST(AugmentationTest, PointOperations) {
  const at::Tensor ramp = u8(torch::arange(50, 100).view({1, 5, 10}));
  const at::Tensor ac = autocontrast(ramp);
  EXPECT_EQ(ac.min().item<int>(), 0);
  EXPECT_EQ(ac.max().item<int>(), 255);
  EXPECT_EQ(ac.scalar_type(), at::kByte);
  EXPECT_TRUE(torch::equal(autocontrast(u8(torch::full({1, 2, 2}, 7))), u8(torch::full({1, 2, 2}, 7))));
  const at::Tensor v = u8(torch::tensor({0, 100, 127, 128, 200, 255}).view({1, 1, 6}));
  EXPECT_TRUE(torch::equal(solarize(v, 128), u8(torch::tensor({0, 100, 127, 127, 55, 0}).view({1, 1, 6}))));
  EXPECT_TRUE(torch::equal(posterize(v, 1), u8(torch::tensor({0, 0, 0, 128, 128, 128}).view({1, 1, 6}))));
  EXPECT_TRUE(torch::equal(posterize(v, 8), v));
  EXPECT_THROW(posterize(v, 9), std::invalid_argument);
  EXPECT_TRUE(torch::equal(brightness(v, 0.0), torch::zeros_like(v)));
  EXPECT_TRUE(torch::equal(brightness(v, 1.0), v));
  EXPECT_TRUE(torch::equal(color(v, 0.3), v));  // one channel: already grey
  EXPECT_TRUE(torch::equal(sharpness(v, 1.0), v));
  const at::Tensor flat = contrast(v, 0.0);
  EXPECT_EQ(flat.min().item<int>(), flat.max().item<int>());
  EXPECT_EQ(flat.min().item<int>(), 135);  // int(mean 135.0 + 0.5)
}

TEST(AugmentationTest, EqualizeUsesPilsLookupTable) {
  // Two values, 100 pixels each: step = (200 - 100) / 256 = 0 -> unchanged (PIL returns the image).
  at::Tensor two = u8(torch::cat({torch::full({100}, 10), torch::full({100}, 20)}).view({1, 10, 20}));
  EXPECT_TRUE(torch::equal(equalize(two), two));
  // 768 zeros plus 0..255 once: step = (1024 - 1) / 256 = 3; the zeros stay 0 and the rest spreads to 255.
  at::Tensor skewed = u8(torch::cat({torch::full({768}, 0), torch::arange(0, 256)}).view({1, 32, 32}));
  const at::Tensor eq = equalize(skewed);
  EXPECT_EQ(eq.max().item<int>(), 255);
  EXPECT_GT(eq.to(at::kFloat).std().item<double>(), skewed.to(at::kFloat).std().item<double>());
  EXPECT_TRUE(torch::all(eq.flatten().slice(0, 0, 768).eq(0)).item<bool>());
}

TEST(AugmentationTest, GeometricOperationsMatchPilConventions) {
  const at::Tensor img = u8(torch::arange(36).view({1, 6, 6}) * 7);
  // 90 degrees counter-clockwise maps pixel centres onto pixel centres: the same as rot90.
  EXPECT_TRUE(torch::equal(rotate(img, 90), torch::rot90(img, 1, {1, 2})));
  EXPECT_TRUE(torch::equal(rotate(img, 0), img));
  // translate_x(2): output (x, y) reads input (x + 2, y): content moves left, zeros enter on the right.
  const at::Tensor t = translate_x(img, 2);
  EXPECT_TRUE(torch::equal(t.slice(2, 0, 4), img.slice(2, 2, 6)));
  EXPECT_EQ(t.slice(2, 4, 6).sum().item<int64_t>(), 0);
  EXPECT_TRUE(torch::equal(translate_y(img, -1).slice(1, 1, 6), img.slice(1, 0, 5)));
  EXPECT_TRUE(torch::equal(shear_x(img, 0.0), img));
  // Float images in [0, 1] keep their dtype and range; batches work too.
  const at::Tensor f = torch::rand({2, 3, 8, 8});
  const at::Tensor r = rotate(f, 30);
  EXPECT_EQ(r.scalar_type(), at::kFloat);
  EXPECT_EQ(r.sizes(), f.sizes());
  EXPECT_LE(r.max().item<double>(), 1.0);
}

TEST(AugmentationTest, SetsAndAugmixAndRandAugment) {
  EXPECT_EQ(augmentation_set("all").size(), 13u);
  EXPECT_EQ(augmentation_set("safe").size(), 9u);
  EXPECT_EQ(to_string(augmentation_set("safe").back()), "translate_y");
  EXPECT_THROW(augmentation_set("most"), std::invalid_argument);
  const at::Tensor img = u8(torch::randint(0, 256, {3, 16, 16}));
  at::Generator g1 = at::detail::createCPUGenerator(9), g2 = at::detail::createCPUGenerator(9);
  const at::Tensor a = augmix_image(img, AugMixOptions(), g1);
  EXPECT_EQ(a.scalar_type(), at::kByte);
  EXPECT_EQ(a.sizes(), img.sizes());
  EXPECT_TRUE(torch::equal(a, augmix_image(img, AugMixOptions(), g2)));  // same generator state, same image
  const at::Tensor r = randaugment_image(img, RandAugmentOptions(), g1);
  EXPECT_EQ(r.sizes(), img.sizes());
  for (auto op : augmentation_set("all")) EXPECT_EQ(augment(img, op, 10, g1).sizes(), img.sizes()) << to_string(op);
  EXPECT_THROW(AugMixOptions().severity(11).validate(), std::invalid_argument);
  EXPECT_THROW(RandAugmentOptions().depth(0).validate(), std::invalid_argument);
}

TEST(AugmentationTest, RunsOnGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  const at::Tensor img = u8(torch::randint(0, 256, {3, 16, 16}));
  at::Generator gen = at::detail::createCPUGenerator(1);
  for (auto op : augmentation_set("all")) {
    at::Generator g_cpu = at::detail::createCPUGenerator(2), g_gpu = at::detail::createCPUGenerator(2);
    const at::Tensor on_cpu = augment(img, op, 5, g_cpu);
    const at::Tensor on_gpu = augment(img.cuda(), op, 5, g_gpu);
    EXPECT_TRUE(on_gpu.is_cuda());
    EXPECT_LE((on_gpu.cpu().to(at::kInt) - on_cpu.to(at::kInt)).abs().max().item<int>(), 1) << to_string(op);
  }
}
