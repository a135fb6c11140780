// The start-up check behind the amp_bf16-on-CPU warning (src/trainer/detail/bf16_probe.h): the text names both
// measured ratios, no text when bfloat16 is not slower, and the Trainer warns only with ratios above the threshold.
#include "trainer/detail/bf16_probe.h"
#include "support/test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
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

// The Trainer measures for itself, and timings under a loaded machine (ctest -j2) move from one measurement to the
// next, so its decision is checked against the ratios it prints: a warning only with a ratio above 1.5.
TEST(Bf16ProbeTest, TheTrainerWarnsOnlyWithTheRatiosItMeasured) {
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
  const std::string text = err.str();
  const auto at = text.find("precision amp_bf16 on this CPU: a bfloat16 convolution takes ");
  if (at != std::string::npos) {
    double conv = 0, matmul = 0;
    ASSERT_EQ(std::sscanf(text.c_str() + at,
                          "precision amp_bf16 on this CPU: a bfloat16 convolution takes %lfx and a matrix product %lfx",
                          &conv, &matmul),
              2)
        << text;
    EXPECT_GT(std::max(conv, matmul), 1.5) << text;
  }
  std::cout << "bfloat16 / float32 time here: convolution " << speed.conv_ratio << "x, matrix product "
            << speed.matmul_ratio << "x; the Trainer " << (at == std::string::npos ? "did not warn" : "warned") << "\n";
}

}  // namespace
}  // namespace composer
