// Reading a sharded (DCP) checkpoint in part: a checkpoint PyTorch wrote (tests/checkpoint/dcp_boxes.py) stores "w"
// (6 x 10) in column halves, boxes that are not ranges of its row-major flattening, each box in a file of its own.
// Any range of a tensor reads as that range of the whole, from the boxes that overlap it; a file the range does not
// touch is never opened.
#include "support/python.h"

#include "checkpoint/detail/dcp_files.h"

#include "composer/checkpoint/checkpoint.h"
#include "composer/checkpoint/distributed_checkpoint.h"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>

#include <unistd.h>

namespace composer {
namespace {

namespace fs = std::filesystem;
using Range = std::pair<int64_t, int64_t>;

struct DistributedCheckpointRead : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_dcp_read_" + std::to_string(::getpid()));
  fs::path ckpt = dir / "boxes";
  std::string right_half;  // the file holding w's columns 5-9
  void SetUp() override {
    COMPOSER_REQUIRE_PYTHON("torch");
    fs::create_directories(dir);
    const auto r = testing::run_python({testing::source_dir() + "/tests/checkpoint/dcp_boxes.py", ckpt.string()});
    ASSERT_EQ(r.status, 0) << r.output;
    const auto at = r.output.find("RIGHT_HALF ");
    ASSERT_NE(at, std::string::npos) << r.output;
    right_half = r.output.substr(at + 11, r.output.find('\n', at) - at - 11);
  }
  void TearDown() override { fs::remove_all(dir); }
};

// Reads `path` with "model/w" and "model/v" wanted in the given ranges (none: whole).
c10::IValue read_parts(const fs::path& path, std::optional<Range> w, std::optional<Range> v,
                       std::vector<ShardedEntry>& parts) {
  const PartsWanted wanted = [&](const std::vector<std::string>& at, const std::vector<int64_t>&) {
    if (at == std::vector<std::string>{"model", "w"}) return w;
    if (at == std::vector<std::string>{"model", "v"}) return v;
    return std::optional<Range>();
  };
  return read_distributed_checkpoint(path.string(), wanted, parts);
}

TEST_F(DistributedCheckpointRead, EachRangeReadsAsThatRangeOfTheWhole) {
  const auto whole = read_distributed_checkpoint(ckpt.string()).toGenericDict().at("state").toGenericDict();
  const auto model = whole.at("model").toGenericDict();
  ASSERT_TRUE(at::equal(model.at("w").toTensor(), at::arange(60, at::kDouble).reshape({6, 10})));
  ASSERT_TRUE(at::equal(model.at("v").toTensor(), at::arange(7, at::kDouble)));
  // Within one box, across both, a single element, empty, the last row, everything.
  for (const Range& range : std::vector<Range>{{0, 5}, {3, 17}, {7, 8}, {12, 12}, {50, 60}, {0, 60}}) {
    std::vector<ShardedEntry> parts;
    const auto payload = read_parts(ckpt, range, Range{2, 6}, parts).toGenericDict().at("state").toGenericDict();
    const auto read_model = payload.at("model").toGenericDict();
    EXPECT_FALSE(read_model.contains("w"));  // read in part: in `parts`, not in the payload
    EXPECT_FALSE(read_model.contains("v"));
    ASSERT_EQ(parts.size(), 2u);
    for (const auto& e : parts) {
      const bool is_w = e.path == std::vector<std::string>{"model", "w"};
      const Range expected = is_w ? range : Range{2, 6};
      EXPECT_EQ(e.part.shape, (is_w ? std::vector<int64_t>{6, 10} : std::vector<int64_t>{7}));
      EXPECT_EQ(e.part.dtype, at::kDouble);
      EXPECT_EQ(e.part.begin, expected.first);
      EXPECT_EQ(e.part.end, expected.second);
      EXPECT_TRUE(at::equal(e.part.values, at::arange(expected.first, expected.second, at::kDouble)))
          << (is_w ? "w " : "v ") << expected.first << "-" << expected.second << ": " << e.part.values;
    }
  }
}

// The file of w's right half removed: what lies elsewhere (w's first 5 elements, row 0 of its left half; all of v)
// still reads, while the whole and any range reaching into the right half name the missing file.
TEST_F(DistributedCheckpointRead, AFileNoRangeTouchesIsNotRead) {
  ASSERT_TRUE(fs::remove(ckpt / right_half)) << right_half;
  std::vector<ShardedEntry> parts;
  EXPECT_NO_THROW(read_parts(ckpt, Range{0, 5}, Range{0, 7}, parts));
  ASSERT_EQ(parts.size(), 2u);
  for (const auto& e : parts)
    EXPECT_TRUE(at::equal(e.part.values, at::arange(e.part.begin, e.part.end, at::kDouble))) << e.part.values;
  const auto expect_missing = [&](const std::function<void()>& read) {
    try {
      read();
      ADD_FAILURE() << "read a checkpoint without its file " << right_half;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("its file '" + right_half + "' is missing"), std::string::npos) << e.what();
    }
  };
  expect_missing([&] { read_distributed_checkpoint(ckpt.string()); });
  expect_missing([&] {
    std::vector<ShardedEntry> more;
    read_parts(ckpt, Range{3, 7}, Range{0, 7}, more);  // row 0, columns 3-6: both halves
  });
}

// From an object store that reads ranges (DcpFiles::read, as S3's Range requests give it), a range fetches the
// stored bytes of the chunks it meets and nothing else: w's first 5 elements and all of v come from the left half's
// file and v's, never from the right half's; the whole tensor reads the same through ranges.
TEST_F(DistributedCheckpointRead, RangedReadsFetchOnlyTheChunksARangeMeets) {
  std::map<std::string, int64_t> fetched;  // bytes per file
  detail::DcpFiles files;
  files.read = [&](const std::string& name, int64_t offset, int64_t length) {
    fetched[name] += length;
    std::ifstream in(ckpt / name, std::ios::binary);
    std::string bytes(static_cast<size_t>(length), '\0');
    in.seekg(offset);
    in.read(bytes.data(), length);
    return bytes.substr(0, static_cast<size_t>(in.gcount()));
  };
  std::vector<ShardedEntry> parts;
  const PartsWanted wanted = [&](const std::vector<std::string>& at, const std::vector<int64_t>&) {
    if (at == std::vector<std::string>{"model", "w"}) return std::optional<Range>(Range{0, 5});
    if (at == std::vector<std::string>{"model", "v"}) return std::optional<Range>(Range{0, 7});
    return std::optional<Range>();
  };
  detail::read_distributed_checkpoint(ckpt.string(), wanted, parts, files);
  ASSERT_EQ(parts.size(), 2u);
  for (const auto& e : parts)
    EXPECT_TRUE(at::equal(e.part.values, at::arange(e.part.begin, e.part.end, at::kDouble))) << e.part.values;
  EXPECT_EQ(fetched.count(right_half), 0u);
  int64_t data_bytes = 0, read_bytes = 0;
  for (const auto& f : fs::directory_iterator(ckpt))
    if (f.path().extension() == ".distcp") data_bytes += static_cast<int64_t>(f.file_size());
  for (const auto& [name, bytes] : fetched) read_bytes += bytes;
  EXPECT_GT(read_bytes, 0);
  EXPECT_LT(read_bytes, data_bytes);
  std::vector<ShardedEntry> none;
  const auto whole = detail::read_distributed_checkpoint(ckpt.string(), PartsWanted(), none, files);
  EXPECT_TRUE(
      at::equal(whole.toGenericDict().at("state").toGenericDict().at("model").toGenericDict().at("w").toTensor(),
                at::arange(60, at::kDouble).reshape({6, 10})));
  EXPECT_GT(fetched.count(right_half), 0u);
}

}  // namespace
}  // namespace composer
