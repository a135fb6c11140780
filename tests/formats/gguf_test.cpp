// GgufFile against the PyPI gguf package (tests/formats/gguf_write.py writes the file and what its own dequantizer
// reads back), and the errors of damaged files.
#include "support/python.h"

#include "composer/formats/gguf.h"
#include "composer/formats/safetensors.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

namespace composer {
namespace {

namespace fs = std::filesystem;

struct GgufTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_gguf_" + std::to_string(::getpid()));
  std::string file = (dir / "t.gguf").string();
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  void write() {
    const auto r = testing::run_python(
        {source_dir() + "/tests/formats/gguf_write.py", file, (dir / "expected.safetensors").string()});
    ASSERT_EQ(r.status, 0) << r.output;
  }
  static std::string source_dir() { return testing::source_dir(); }
  // The message of the runtime_error that opening `path` throws.
  static std::string open_error(const std::string& path) {
    try {
      formats::GgufFile f(path);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "no error";
  }
};

TEST_F(GgufTest, EveryTypeDequantizesAsTheGgufPackage) {
  COMPOSER_REQUIRE_PYTHON("gguf numpy safetensors");
  write();
  formats::GgufFile f(file);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("test.u32"), 7);
  EXPECT_EQ(f.get_int("test.i64"), -5);
  EXPECT_DOUBLE_EQ(f.get_float("test.f32"), 0.5);
  EXPECT_TRUE(f.get_bool("test.bool"));
  EXPECT_EQ(f.get_string("test.str"), "h\xc3\xa9llo");
  EXPECT_EQ(f.get_strings("test.strs"), (std::vector<std::string>{"a", "bc", ""}));
  EXPECT_EQ(f.get_ints("test.ints"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(f.get_floats("test.floats"), (std::vector<double>{0.25, 1.5}));
  EXPECT_EQ(f.tensors().size(), 11u);
  for (const auto& [name, want] : read_safetensors((dir / "expected.safetensors").string())) {
    SCOPED_TRACE(name);
    const at::Tensor got = f.tensor(name);
    EXPECT_EQ(got.sizes(), want.sizes());
    EXPECT_TRUE(at::equal(got, want)) << (got - want).abs().max().item<double>();
  }
  EXPECT_EQ(f.tensor("q8_0", at::kDouble).scalar_type(), at::kDouble);
}

// A sharded load reads parts: any element range (inside a block, across blocks and rows, the whole tensor) equals the
// same elements of the whole tensor, for every type.
TEST_F(GgufTest, PartsOfEveryTypeAreTheWholeTensorsElements) {
  COMPOSER_REQUIRE_PYTHON("gguf numpy safetensors");
  write();
  formats::GgufFile f(file);
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 768}, {0, 1}, {5, 20}, {31, 2}, {250, 300}, {767, 1}};
  for (const auto& t : f.tensors()) {
    const at::Tensor whole = f.tensor(t.name).reshape(-1);
    ASSERT_EQ(whole.numel(), 768) << t.name;
    for (const auto& [offset, numel] : ranges) {
      const at::Tensor part = f.read_part(t.name, offset, numel);
      EXPECT_EQ(part.numel(), numel) << t.name << " at " << offset;
      EXPECT_TRUE(at::equal(part, whole.narrow(0, offset, numel))) << t.name << " at " << offset;
    }
  }
  try {
    f.read_part("q4_k", 700, 100);
    ADD_FAILURE() << "a range outside the tensor was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'q4_k'): elements [700, 800) lie outside its 768"), std::string::npos)
        << e.what();
  }
}

TEST_F(GgufTest, DamagedFilesAndWrongQuestionsAreErrorsNamingTheFile) {
  COMPOSER_REQUIRE_PYTHON("gguf numpy safetensors");
  write();
  {
    formats::GgufFile f(file);
    EXPECT_THROW(
        {
          try {
            f.get_int("test.str");
          } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find("key 'test.str' is a string, expected an integer"), std::string::npos)
                << e.what();
            throw;
          }
        },
        std::runtime_error);
    EXPECT_THROW(f.tensor("nope"), std::runtime_error);
    EXPECT_THROW(f.get_string("missing.key"), std::runtime_error);
  }
  const auto size = fs::file_size(file);
  const std::string cut = (dir / "cut.gguf").string();
  fs::copy_file(file, cut);
  fs::resize_file(cut, size - 100);
  EXPECT_NE(open_error(cut).find("truncated: tensor 'q6_k'"), std::string::npos) << open_error(cut);
  EXPECT_NE(open_error(cut).find("cut.gguf"), std::string::npos);
  fs::resize_file(cut, 40);
  EXPECT_NE(open_error(cut).find("truncated"), std::string::npos) << open_error(cut);
  std::ofstream((dir / "text.gguf").string()) << "not a model at all";
  EXPECT_NE(open_error((dir / "text.gguf").string()).find("is not GGUF"), std::string::npos);
  EXPECT_NE(open_error((dir / "absent.gguf").string()).find("cannot be opened"), std::string::npos);

  // An unknown tensor type: rewrite the first tensor's type field (after its name, dims and shape) to 99.
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // The first tensor's name, "f32" after its uint64 length 3; its type follows the dimension count and two dims.
  const size_t name_at = bytes.find(std::string("\x03\0\0\0\0\0\0\0f32", 11));
  ASSERT_NE(name_at, std::string::npos);
  const size_t type_at = name_at + 11 + 4 + 2 * 8;
  const uint32_t bad = 99;
  bytes.replace(type_at, 4, reinterpret_cast<const char*>(&bad), 4);
  const std::string odd = (dir / "odd.gguf").string();
  std::ofstream(odd, std::ios::binary) << bytes;
  EXPECT_NE(open_error(odd).find("tensor 'f32': ggml type type 99 cannot be read"), std::string::npos)
      << open_error(odd);
}

TEST(GgmlQuants, BlockSizesAndCountsAreChecked) {
  EXPECT_EQ(formats::ggml_nbytes(static_cast<uint32_t>(formats::GgmlType::Q4_1), 64), 40u);
  EXPECT_EQ(formats::ggml_nbytes(static_cast<uint32_t>(formats::GgmlType::Q6_K), 512), 420u);
  EXPECT_THROW(formats::ggml_nbytes(static_cast<uint32_t>(formats::GgmlType::Q4_K), 100), std::invalid_argument);
  EXPECT_THROW(formats::ggml_nbytes(static_cast<uint32_t>(formats::GgmlType::Q2_K), 256), std::invalid_argument);
  EXPECT_EQ(formats::ggml_type_name(12), "Q4_K");
}

// SafetensorsFile keeps the file open: parts are read at their offsets through the one descriptor (a tensor-parallel
// rank reads a row-parallel weight row by row), also after the path is gone; every error names the file.
TEST(SafetensorsFileTest, ReadsPartsThroughTheFileItOpened) {
  const fs::path dir = fs::temp_directory_path() / ("composer_safetensors_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "w.safetensors").string();
  const at::Tensor w = at::arange(6 * 5, at::kFloat).view({6, 5});
  write_safetensors(path, {{"b", at::arange(3, at::kLong)}, {"w", w}});
  const SafetensorsFile file(path);
  const SafetensorsFile copy = file;
  fs::remove(path);  // the open file stays readable
  for (int64_t row = 0; row < 6; ++row) EXPECT_TRUE(copy.read_part("w", row * 5 + 1, 3).equal(w[row].narrow(0, 1, 3)));
  EXPECT_TRUE(file.tensor("b").equal(at::arange(3, at::kLong)));
  auto error = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error([&] { file.read_part("w", 28, 3); }),
            "safetensors file '" + path + "': elements [28, 31) of 'w', which has 30");
  EXPECT_EQ(error([&] { SafetensorsFile{path}; }), "safetensors file '" + path + "' cannot be opened");
  EXPECT_EQ(error([&] { SafetensorsFile{dir.string()}; }),
            "safetensors file '" + dir.string() + "' cannot be read: Is a directory");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace composer
