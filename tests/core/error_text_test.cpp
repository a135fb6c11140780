#include "composer/utils/error_text.h"

#include <c10/util/Exception.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

namespace composer {
namespace {

TEST(ErrorTextTest, LibTorchAndGlooInternalsAreStripped) {
  EXPECT_EQ(
      brief_error_text("[enforce fail at inline_container.cc:325] . PytorchStreamReader failed reading zip archive: "
                       "failed finding central directory\nException raised from valid at /pytorch/x.cc:1 (most "
                       "recent call first):\nframe #0: c10::Error::Error"),
      "PytorchStreamReader failed reading zip archive: failed finding central directory");
  EXPECT_EQ(brief_error_text("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:525] Read error [127.0.0.1]:34191: "
                             "Connection reset by peer"),
            "Read error [127.0.0.1]:34191: Connection reset by peer");
  EXPECT_EQ(brief_error_text("two\nlines"), "two; lines");
  EXPECT_EQ(brief_error_text(std::string(500, 'x'), 20).size(), 20u);
  // A real c10::Error from a shape mismatch: the message, no frames.
  try {
    torch::matmul(torch::ones({2, 3}), torch::ones({2, 3}));
    FAIL();
  } catch (const c10::Error& e) {
    const std::string b = brief_error(e);
    EXPECT_NE(b.find("cannot be multiplied"), std::string::npos) << b;
    EXPECT_EQ(b.find("Exception raised from"), std::string::npos) << b;
    EXPECT_EQ(b.find("frame #"), std::string::npos) << b;
  }
}

}  // namespace
}  // namespace composer
