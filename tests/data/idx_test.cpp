#include "support/data_paths.h"
#include "support/test_support.h"

#include <zlib.h>

#include <gtest/gtest.h>

#include <fstream>

namespace composer {
namespace {

namespace fs = std::filesystem;

struct IdxFiles : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_idx_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  static std::string header(uint32_t magic, const std::vector<uint32_t>& dims) {
    std::string h;
    auto be = [&](uint32_t v) {
      for (int s = 24; s >= 0; s -= 8) h += static_cast<char>((v >> s) & 0xff);
    };
    be(magic);
    for (uint32_t d : dims) be(d);
    return h;
  }
  std::string write(const std::string& name, const std::string& bytes, bool gzip = false) {
    const std::string path = (dir / name).string();
    if (gzip) {
      gzFile f = gzopen(path.c_str(), "wb");
      gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
      gzclose(f);
    } else {
      std::ofstream(path, std::ios::binary) << bytes;
    }
    return path;
  }
  void expect_error(const std::string& path, const std::string& needle) {
    try {
      read_idx(path);
      FAIL() << "expected an error for " << path;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
};

TEST_F(IdxFiles, ReadsRawAndGzip) {
  const std::string body =
      header(0x803, {2, 2, 3}) + std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", 12);
  for (bool gz : {false, true}) {
    const at::Tensor t = read_idx(write(gz ? "a.gz" : "a", body, gz));
    EXPECT_EQ(t.sizes(), (std::vector<int64_t>{2, 2, 3}));
    EXPECT_EQ(t[1][1][2].item<uint8_t>(), 12);
  }
}

TEST_F(IdxFiles, CorruptFilesNameTheFileAndTheProblem) {
  expect_error(write("magic", header(0x802, {1}) + "x"), "magic number 0x00000802");
  expect_error(write("short", header(0x801, {10}) + "abc"), "truncated: expected 10 data bytes, found 3");
  expect_error(write("trailing", header(0x801, {2}) + "abc"), "bytes after");
  expect_error(write("empty", ""), "truncated");
  expect_error((dir / "missing").string(), "cannot be opened");
  expect_error(write("short.gz", header(0x803, {5, 2, 2}) + "ab", true), "truncated");
  // Absurd sizes in the header are refused before anything is allocated, for raw and gzip files.
  expect_error(write("huge", header(0x803, {4000000000u, 4000000000u, 4000000000u}) + "abc"),
               "declares 4000000000x4000000000x4000000000");
  expect_error(write("huge.gz", header(0x803, {60000, 1000, 1000}) + "abc", true), "more than its");
}

TEST_F(IdxFiles, LabelsOutOfRangeAndCountMismatch) {
  const std::string images = write("img", header(0x803, {2, 1, 1}) + std::string("\x00\x01", 2));
  const std::string bad_labels = write("lab", header(0x801, {2}) + std::string("\x03\x0c", 2));
  try {
    load_idx_classification(images, bad_labels, 10);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("label 12"), std::string::npos) << e.what();
  }
  const std::string three = write("lab3", header(0x801, {3}) + std::string("\x01\x02\x03", 3));
  EXPECT_THROW(load_idx_classification(images, three, 10), std::runtime_error);
  // Zero samples: an error naming the file, not a reduction over an empty tensor.
  try {
    load_idx_classification(write("img0", header(0x803, {0, 28, 28})), write("lab0", header(0x801, {0})), 10);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("IDX file '" + (dir / "img0").string() + "' holds no images"),
              std::string::npos)
        << e.what();
  }
  auto ds = load_idx_classification(images, write("ok", header(0x801, {2}) + std::string("\x03\x04", 2)), 10);
  EXPECT_EQ(ds->size(), 2);
  EXPECT_EQ(ds->data().input().sizes(), (std::vector<int64_t>{2, 1, 1, 1}));
}

TEST(RealData, MnistHasTheKnownFirstLabels) {
  const std::string root = testing::data_path("mnist");
  COMPOSER_OPTIONAL_DATA(root + "/t10k-labels-idx1-ubyte");
  auto train = load_mnist(root, true, 5), test = load_mnist(root, false);
  EXPECT_TRUE(train->data().target().equal(torch::tensor({5, 0, 4, 1, 9}, at::kLong)));
  EXPECT_EQ(test->size(), 10000);
  EXPECT_TRUE(test->data().target().narrow(0, 0, 5).equal(torch::tensor({7, 2, 1, 0, 4}, at::kLong)));
  EXPECT_EQ(test->data().input().sizes(), (std::vector<int64_t>{10000, 1, 28, 28}));
}

TEST(RealData, FashionMnistFromGzip) {
  const std::string root = testing::data_path("fashion-mnist");
  COMPOSER_REQUIRE_DATA(root + "/t10k-labels-idx1-ubyte.gz");
  auto train = load_mnist(root, true, 5), test = load_mnist(root, false, 5);
  EXPECT_TRUE(train->data().target().equal(torch::tensor({9, 0, 0, 3, 0}, at::kLong)));
  EXPECT_TRUE(test->data().target().equal(torch::tensor({9, 2, 1, 1, 6}, at::kLong)));
}

}  // namespace
}  // namespace composer
