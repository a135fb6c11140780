#include "composer/formats/gguf.h"

#include <ATen/ATen.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace composer::formats {
namespace {

enum ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// A bounds-checked cursor over the mapped bytes: every read past the end is an error naming the file and what was
// being read.
class Cursor {
 public:
  Cursor(const unsigned char* data, size_t size, const std::string& path) : data_(data), size_(size), path_(path) {}

  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const char* what) {
    const auto n = read<uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  size_t pos() const { return pos_; }
  [[noreturn]] void fail(const std::string& message) const {
    throw std::runtime_error("GGUF file '" + path_ + "': " + message);
  }

 private:
  void need(uint64_t n, const char* what) const {
    if (n > size_ - pos_) {
      fail("truncated: " + std::string(what) + " needs " + std::to_string(n) + " bytes at offset " +
           std::to_string(pos_) + ", the file has " + std::to_string(size_));
    }
  }
  const unsigned char* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

int64_t integer(Cursor& c, uint32_t type, const std::string& key) {
  switch (type) {
    case kU8:
      return c.read<uint8_t>("a value");
    case kI8:
      return c.read<int8_t>("a value");
    case kU16:
      return c.read<uint16_t>("a value");
    case kI16:
      return c.read<int16_t>("a value");
    case kU32:
      return c.read<uint32_t>("a value");
    case kI32:
      return c.read<int32_t>("a value");
    case kI64:
      return c.read<int64_t>("a value");
    case kU64: {
      const auto v = c.read<uint64_t>("a value");
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) c.fail("key '" + key + "': uint64 too large");
      return static_cast<int64_t>(v);
    }
    default:
      c.fail("key '" + key + "' has unknown value type " + std::to_string(type));
  }
}

bool is_integer(uint32_t type) { return type <= kI32 || type == kU64 || type == kI64; }

GgufValue array(Cursor& c, const std::string& key) {
  const auto type = c.read<uint32_t>("an array type");
  const auto n = c.read<uint64_t>("an array length");
  if (n > (1ull << 32)) c.fail("key '" + key + "': array of " + std::to_string(n) + " elements");
  if (type == kString) {
    std::vector<std::string> out;
    out.reserve(n);
    for (uint64_t i = 0; i < n; ++i) out.push_back(c.string("an array string"));
    return out;
  }
  if (type == kF32 || type == kF64) {
    std::vector<double> out(n);
    for (auto& v : out) v = type == kF32 ? c.read<float>("an array float") : c.read<double>("an array float");
    return out;
  }
  if (type == kBool || is_integer(type)) {
    std::vector<int64_t> out(n);
    for (auto& v : out) v = type == kBool ? c.read<uint8_t>("an array bool") : integer(c, type, key);
    return out;
  }
  c.fail("key '" + key + "' is an array of " + (type == kArray ? "arrays" : "type " + std::to_string(type)) +
         ", which this reader does not take");
}

GgufValue value(Cursor& c, uint32_t type, const std::string& key) {
  switch (type) {
    case kF32:
      return static_cast<double>(c.read<float>("a float"));
    case kF64:
      return c.read<double>("a float");
    case kBool:
      return c.read<uint8_t>("a bool") != 0;
    case kString:
      return c.string("a string");
    case kArray:
      return array(c, key);
    default:
      return integer(c, type, key);
  }
}

const char* kind_name(const GgufValue& v) {
  static const char* names[] = {"an integer",       "a float",       "a bool",        "a string",
                                "an integer array", "a float array", "a string array"};
  return names[v.index()];
}

}  // namespace

GgufFile::GgufFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("GGUF file '" + path + "' cannot be opened: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < 4) {
    ::close(fd);
    throw std::runtime_error("GGUF file '" + path + "' is not GGUF: " + std::to_string(st.st_size) + " bytes");
  }
  size_ = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw std::runtime_error("GGUF file '" + path + "' cannot be mapped: " + std::strerror(errno));
  data_ = static_cast<const unsigned char*>(map);
  try {
    parse();
  } catch (...) {
    ::munmap(const_cast<unsigned char*>(data_), size_);
    throw;
  }
}

GgufFile::~GgufFile() { ::munmap(const_cast<unsigned char*>(data_), size_); }

void GgufFile::parse() {
  Cursor c(data_, size_, path_);
  if (std::memcmp(data_, "GGUF", 4) != 0) c.fail("is not GGUF (no 'GGUF' magic at the start)");
  c.read<uint32_t>("the magic");
  version_ = c.read<uint32_t>("the version");
  if (version_ != 2 && version_ != 3) c.fail("has version " + std::to_string(version_) + ", expected 2 or 3");
  const auto n_tensors = c.read<uint64_t>("the tensor count");
  const auto n_kv = c.read<uint64_t>("the metadata count");
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.string("a metadata key");
    const auto type = c.read<uint32_t>("a metadata type");
    metadata_[key] = value(c, type, key);
  }
  std::vector<uint64_t> offsets;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = c.string("a tensor name");
    const auto dims = c.read<uint32_t>("a tensor's dimension count");
    if (dims > 8) c.fail("tensor '" + t.name + "' has " + std::to_string(dims) + " dimensions");
    int64_t count = 1;
    for (uint32_t d = 0; d < dims; ++d) {
      const auto n = c.read<uint64_t>("a tensor dimension");
      if (n > (1ull << 40)) c.fail("tensor '" + t.name + "' has a dimension of " + std::to_string(n));
      t.shape.insert(t.shape.begin(), static_cast<int64_t>(n));
      count *= static_cast<int64_t>(n);
    }
    t.type = c.read<uint32_t>("a tensor type");
    offsets.push_back(c.read<uint64_t>("a tensor offset"));
    try {
      t.nbytes = ggml_nbytes(t.type, count);
    } catch (const std::invalid_argument& e) {
      c.fail("tensor '" + t.name + "': " + e.what());
    }
    index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  const int64_t alignment = has("general.alignment") ? get_int("general.alignment") : 32;
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0) c.fail("general.alignment " + std::to_string(alignment));
  const uint64_t start = (c.pos() + alignment - 1) / alignment * alignment;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    auto& t = tensors_[i];
    t.offset = start + offsets[i];
    if (offsets[i] > size_ || t.offset > size_ || t.nbytes > size_ - t.offset) {
      c.fail("truncated: tensor '" + t.name + "' needs bytes [" + std::to_string(t.offset) + ", " +
             std::to_string(t.offset + t.nbytes) + ") but the file has " + std::to_string(size_));
    }
  }
}

namespace {
template <class T>
const T& typed(const std::map<std::string, GgufValue>& m, const std::string& key, const std::string& path,
               const char* expected) {
  const auto it = m.find(key);
  if (it == m.end()) throw std::runtime_error("GGUF file '" + path + "' has no metadata key '" + key + "'");
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  throw std::runtime_error("GGUF file '" + path + "': key '" + key + "' is " + kind_name(it->second) + ", expected " +
                           expected);
}
}  // namespace

int64_t GgufFile::get_int(const std::string& key) const { return typed<int64_t>(metadata_, key, path_, "an integer"); }
bool GgufFile::get_bool(const std::string& key) const { return typed<bool>(metadata_, key, path_, "a bool"); }
std::string GgufFile::get_string(const std::string& key) const {
  return typed<std::string>(metadata_, key, path_, "a string");
}
double GgufFile::get_float(const std::string& key) const {
  const auto it = metadata_.find(key);
  if (it != metadata_.end() && std::holds_alternative<int64_t>(it->second))
    return static_cast<double>(std::get<int64_t>(it->second));
  return typed<double>(metadata_, key, path_, "a float");
}
std::vector<int64_t> GgufFile::get_ints(const std::string& key) const {
  return typed<std::vector<int64_t>>(metadata_, key, path_, "an integer array");
}
std::vector<double> GgufFile::get_floats(const std::string& key) const {
  return typed<std::vector<double>>(metadata_, key, path_, "a float array");
}
std::vector<std::string> GgufFile::get_strings(const std::string& key) const {
  return typed<std::vector<std::string>>(metadata_, key, path_, "a string array");
}

const GgufTensorInfo& GgufFile::info(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) throw std::runtime_error("GGUF file '" + path_ + "' has no tensor '" + name + "'");
  return tensors_[it->second];
}

at::Tensor GgufFile::tensor(const std::string& name, at::ScalarType dtype) const {
  if (!at::isFloatingType(dtype)) {
    throw std::invalid_argument("GgufFile::tensor('" + name + "'): dtype must be floating, got " +
                                std::string(c10::toString(dtype)));
  }
  const GgufTensorInfo& t = info(name);
  int64_t numel = 1;
  for (const int64_t d : t.shape) numel *= d;
  return read_part(name, 0, numel).view(t.shape).to(dtype);
}

at::Tensor GgufFile::read_part(const std::string& name, int64_t offset, int64_t numel) const {
  const GgufTensorInfo& t = info(name);
  int64_t total = 1;
  for (const int64_t d : t.shape) total *= d;
  if (offset < 0 || numel < 0 || offset + numel > total) {
    throw std::invalid_argument("GgufFile::read_part('" + name + "'): elements [" + std::to_string(offset) + ", " +
                                std::to_string(offset + numel) + ") lie outside its " + std::to_string(total));
  }
  const unsigned char* src = data_ + t.offset;
  if (t.type == static_cast<uint32_t>(GgmlType::F16) || t.type == static_cast<uint32_t>(GgmlType::BF16) ||
      t.type == static_cast<uint32_t>(GgmlType::F32)) {
    const auto stored = t.type == static_cast<uint32_t>(GgmlType::F16)    ? at::kHalf
                        : t.type == static_cast<uint32_t>(GgmlType::BF16) ? at::kBFloat16
                                                                          : at::kFloat;
    const int64_t bytes = static_cast<int64_t>(c10::elementSize(stored));
    return at::from_blob(const_cast<unsigned char*>(src + offset * bytes), {numel}, at::TensorOptions().dtype(stored))
        .to(at::kFloat, false, true);
  }
  // Quantized: the blocks covering the range (a block never spans two rows: a row is a whole number of blocks).
  const int64_t block = ggml_block_size(t.type);
  const int64_t first = offset / block, last = (offset + numel + block - 1) / block;
  at::Tensor out = at::empty({(last - first) * block}, at::kFloat);
  dequantize(t.type, src + first * static_cast<int64_t>(ggml_nbytes(t.type, block)), out.data_ptr<float>(),
             out.numel());
  return out.narrow(0, offset - first * block, numel);
}

}  // namespace composer::formats
