// The start-up check behind the amp_bf16-on-CPU warning (src/trainer/detail/bf16_probe.h): the text names both
// measured ratios, no text when bfloat16 is not slower, and the Trainer prints it exactly when this CPU measures so.
#include "trainer/detail/bf16_probe.h"
#include "support/test_support.h"

#include <gtest/gtest.h>

#include <iostream>
#include <sstream>

namespace composer {
namespace {

TEST(Bf16ProbeTest, WarnsOnlyWhenBfloat16IsSlowerAndSaysByHowMuch) {
  const auto slow = detail::bf16_warning({20.04, 1.26});
  ASSERT_TRUE(slow.has_value());
  EXPECT_NE(slow->find("a bfloat16 convolution takes 20.0x and a matrix product 1.3x the float32 time"),
            std::string::npos)
      << *slow;
  EXPECT_NE(slow->find("set precision fp32"), std::string::npos);
  EXPECT_FALSE(detail::bf16_warning({1.2, 0.6}).has_value());
  EXPECT_TRUE(detail::bf16_warning({1.0, 1.6}).has_value());
}

TEST(Bf16ProbeTest, TheTrainerWarnsWhenThisCpuMeasuresBfloat16Slower) {
  const detail::Bf16Speed speed = detail::measure_cpu_bf16_speed();
  EXPECT_GT(speed.conv_ratio, 0.0);
  EXPECT_GT(speed.matmul_ratio, 0.0);
  std::ostringstream err;
  auto* old = std::cerr.rdbuf(err.rdbuf());
  {
    Trainer trainer(testing::quiet_options(testing::make_classifier())
                        .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                        .max_duration("1ba")
                        .precision(Precision::AMP_BF16));
  }
  std::cerr.rdbuf(old);
  const bool warned = err.str().find("precision amp_bf16 on this CPU") != std::string::npos;
  // The Trainer measures again; a ratio this close to the threshold may land on either side of it.
  if (speed.conv_ratio > 2.0 || speed.matmul_ratio > 2.0) {
    EXPECT_TRUE(warned) << err.str();
  }
  if (speed.conv_ratio < 1.0 && speed.matmul_ratio < 1.0) {
    EXPECT_FALSE(warned) << err.str();
  }
  std::cout << "bfloat16 / float32 time here: convolution " << speed.conv_ratio << "x, matrix product "
            << speed.matmul_ratio << "x\n";
}

}  // namespace
}  // namespace composer
