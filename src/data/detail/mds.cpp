#include "data/detail/mds.h"

#include "data/detail/image_decode.h"

#include "composer/utils/atomic_file.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace composer::detail {

namespace {

template <class T>
T read_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

/// The encoding's name and its arguments: "ndarray:uint16:2048" -> {"ndarray", "uint16:2048"}.
std::pair<std::string, std::string> split_encoding(const std::string& encoding) {
  const auto colon = encoding.find(':');
  if (colon == std::string::npos) return {encoding, ""};
  return {encoding.substr(0, colon), encoding.substr(colon + 1)};
}

struct Dtype {
  const char* name;
  int code;
  at::ScalarType type;
  size_t bytes;
};

// Streaming's value dtypes (NDArray._int2value_dtype) and what LibTorch holds them as. uint16/32/64 have no LibTorch
// arithmetic on every version: they are widened to int32/int64 when decoded (token ids fit).
const Dtype kDtypes[] = {{"uint8", 8, at::kByte, 1},   {"int8", 9, at::kChar, 1},      {"uint16", 16, at::kInt, 2},
                         {"int16", 17, at::kShort, 2}, {"float16", 18, at::kHalf, 2},  {"uint32", 32, at::kLong, 4},
                         {"int32", 33, at::kInt, 4},   {"float32", 34, at::kFloat, 4}, {"uint64", 64, at::kLong, 8},
                         {"int64", 65, at::kLong, 8},  {"float64", 66, at::kDouble, 8}};

const Dtype* dtype_by_name(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

const Dtype* dtype_by_code(int code) {
  for (const auto& d : kDtypes)
    if (code == d.code) return &d;
  return nullptr;
}

/// Raw little-endian values of `d` as a tensor of d.type (widening the unsigned 16/32-bit ones).
at::Tensor values(const Dtype& d, const char* p, int64_t count) {
  at::Tensor t = at::empty({count}, at::TensorOptions().dtype(d.type));
  const std::string n = d.name;
  if (n == "uint16") {
    auto* out = t.data_ptr<int32_t>();
    for (int64_t i = 0; i < count; ++i) out[i] = read_le<uint16_t>(p + 2 * i);
  } else if (n == "uint32") {
    auto* out = t.data_ptr<int64_t>();
    for (int64_t i = 0; i < count; ++i) out[i] = read_le<uint32_t>(p + 4 * i);
  } else {
    std::memcpy(t.data_ptr(), p, static_cast<size_t>(count) * d.bytes);
  }
  return t;
}

const char* kScalars[] = {"uint8", "uint16", "uint32",  "uint64",  "int8",   "int16",
                          "int32", "int64",  "float16", "float32", "float64"};

}  // namespace

std::vector<MdsShard> parse_mds_index(const nlohmann::json& index, const std::string& where) {
  auto bad = [&](const std::string& what) { throw std::invalid_argument(where + ": " + what); };
  if (!index.is_object() || !index.contains("shards") || !index["shards"].is_array())
    bad("not a Streaming index (expected {\"version\": 2, \"shards\": [...]})");
  if (!index.contains("version") || index["version"] != 2)
    bad("index version " + (index.contains("version") ? index["version"].dump() : std::string("missing")) +
        " (expected 2, the version MosaicML Streaming writes and reads)");
  std::vector<MdsShard> shards;
  for (size_t i = 0; i < index["shards"].size(); ++i) {
    const auto& s = index["shards"][i];
    const std::string at = "shard " + std::to_string(i);
    try {
      if (s.value("format", "") != "mds") bad(at + ": format '" + s.value("format", "") + "' (expected mds)");
      if (s.value("version", 0) != 2) bad(at + ": version " + std::to_string(s.value("version", 0)) + " (expected 2)");
      MdsShard shard;
      const auto names = s.at("column_names").get<std::vector<std::string>>();
      const auto encodings = s.at("column_encodings").get<std::vector<std::string>>();
      const auto& sizes = s.at("column_sizes");
      if (names.size() != encodings.size() || sizes.size() != names.size())
        bad(at + ": column_names, column_encodings and column_sizes differ in length");
      for (size_t c = 0; c < names.size(); ++c) {
        if (const std::string why = mds_unsupported(encodings[c]); !why.empty())
          bad(at + ": column '" + names[c] + "': " + why);
        shard.columns.push_back({names[c], encodings[c],
                                 sizes[c].is_null() ? std::nullopt : std::optional<int64_t>(sizes[c].get<int64_t>())});
      }
      std::string compression =
          s.value("compression", nlohmann::json()).is_string() ? s["compression"].get<std::string>() : "";
      compression = compression.substr(0, compression.find(':'));
      if (!compression.empty() && compression != "zstd")
        bad(at + ": compression '" + compression + "' is not supported (expected none or zstd)");
      shard.compression = compression;
      auto file = [&](const nlohmann::json& f) {
        MdsFile out;
        out.basename = f.at("basename").get<std::string>();
        out.bytes = f.at("bytes").get<int64_t>();
        if (f.contains("hashes") && f["hashes"].is_object())
          for (const auto& [k, v] : f["hashes"].items()) out.hashes[k] = v.get<std::string>();
        if (out.basename.find("..") != std::string::npos || out.basename.empty() || out.basename[0] == '/')
          bad(at + ": basename '" + out.basename + "' leaves the data set folder");
        return out;
      };
      shard.raw = file(s.at("raw_data"));
      if (!compression.empty()) {
        if (!s.contains("zip_data") || s["zip_data"].is_null()) bad(at + ": compressed, but no zip_data");
        shard.zip = file(s["zip_data"]);
      }
      shard.samples = s.at("samples").get<int64_t>();
      if (shard.samples < 0) bad(at + ": negative sample count");
      shards.push_back(std::move(shard));
    } catch (const nlohmann::json::exception& e) {
      bad(at + ": " + e.what());
    }
  }
  return shards;
}

MappedFile::MappedFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("cannot open shard '" + path + "': " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw std::runtime_error("cannot map shard '" + path + "': " + std::strerror(errno));
    }
    data_ = static_cast<const char*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<char*>(data_), size_);
}

void check_mds_header(const MappedFile& shard, int64_t samples, const std::string& where) {
  if (shard.size() < 4) throw std::runtime_error(where + ": " + std::to_string(shard.size()) + " bytes, no header");
  const uint32_t n = read_le<uint32_t>(shard.data());
  if (static_cast<int64_t>(n) != samples)
    throw std::runtime_error(where + ": its header says it holds " + std::to_string(n) + " samples; the index says " +
                             std::to_string(samples) + " (the index and the shard do not belong together)");
  if ((static_cast<size_t>(n) + 2) * 4 > shard.size())
    throw std::runtime_error(where + ": the table of " + std::to_string(n) + " samples runs past the file's " +
                             std::to_string(shard.size()) + " bytes");
}

std::string_view mds_sample(const MappedFile& shard, int64_t i, const std::string& where) {
  const size_t table = static_cast<size_t>(i + 2) * 4;
  if (shard.size() < 4 || table + 4 > shard.size()) throw std::runtime_error(where + ": sample table is truncated");
  const uint32_t n = read_le<uint32_t>(shard.data());
  if (static_cast<int64_t>(n) <= i)
    throw std::runtime_error(where + ": sample " + std::to_string(i) + " of " + std::to_string(n));
  const uint32_t begin = read_le<uint32_t>(shard.data() + 4 + 4 * i), end = read_le<uint32_t>(shard.data() + 8 + 4 * i);
  if (begin > end || end > shard.size())
    throw std::runtime_error(where + ": sample " + std::to_string(i) + " lies outside the file");
  return {shard.data() + begin, end - begin};
}

std::vector<std::string_view> mds_columns(std::string_view sample, const std::vector<MdsColumn>& columns,
                                          const std::string& where) {
  std::vector<int64_t> sizes;
  size_t pos = 0;
  for (const auto& c : columns) {
    if (c.size) {
      sizes.push_back(*c.size);
      continue;
    }
    if (pos + 4 > sample.size()) throw std::runtime_error(where + ": sample too short for its column sizes");
    sizes.push_back(read_le<uint32_t>(sample.data() + pos));
    pos += 4;
  }
  std::vector<std::string_view> out;
  for (size_t c = 0; c < columns.size(); ++c) {
    if (pos + static_cast<size_t>(sizes[c]) > sample.size())
      throw std::runtime_error(where + ": column '" + columns[c].name + "' runs past the sample");
    out.push_back(sample.substr(pos, static_cast<size_t>(sizes[c])));
    pos += static_cast<size_t>(sizes[c]);
  }
  return out;
}

bool mds_is_tensor(const std::string& encoding) {
  const auto [name, args] = split_encoding(encoding);
  if (name == "int" || name == "str_int" || name == "str_float" || name == "ndarray" || name == "pil" ||
      name == "jpeg" || name == "png" || name == "jpeg_array" || name == "jpegarray" || name == "list[pil]" ||
      name == "list[jpeg]" || name == "list[png]")
    return true;
  for (const char* s : kScalars)
    if (name == s) return true;
  return false;
}

std::string mds_unsupported(const std::string& encoding) {
  const auto [name, args] = split_encoding(encoding);
  if (name == "pkl") return "encoding 'pkl' runs arbitrary code when read; it is refused (as Streaming refuses it)";
  if (name == "ndarray") {
    const std::string dtype = args.substr(0, args.find(':'));
    if (!dtype.empty() && !dtype_by_name(dtype)) return "ndarray dtype '" + dtype + "' is unknown";
    return "";
  }
  if (mds_is_tensor(encoding) || name == "str" || name == "bytes" || name == "json" || name == "str_decimal") return "";
  return "encoding '" + encoding + "' is unknown";
}

namespace {

/// Streaming's image lists: [skip bytes] [count: u32] [count sizes: u32] [the images], each decoded as `element`
/// (pil, jpeg or png) and stacked into uint8 [N, C, H, W].
at::Tensor decode_image_list(std::string_view v, size_t skip, const std::string& element, const std::string& where) {
  if (v.size() < skip + 4)
    throw std::runtime_error(where + ": an image list of " + std::to_string(v.size()) + " bytes");
  const uint32_t n = read_le<uint32_t>(v.data() + skip);
  size_t pos = skip + 4 + 4 * static_cast<size_t>(n);
  if (v.size() < pos)
    throw std::runtime_error(where + ": an image list of " + std::to_string(n) + " images in " +
                             std::to_string(v.size()) + " bytes");
  std::vector<at::Tensor> images;
  for (uint32_t i = 0; i < n; ++i) {
    const size_t size = read_le<uint32_t>(v.data() + skip + 4 + 4 * i);
    const std::string at_i = where + " image " + std::to_string(i);
    if (pos + size > v.size()) throw std::runtime_error(at_i + " runs past the value");
    images.push_back(mds_decode_tensor(element, v.substr(pos, size), at_i));
    pos += size;
    if (images.back().sizes() != images.front().sizes())
      throw std::runtime_error(at_i + " has shape " + c10::str(images.back().sizes()) + " and image 0 " +
                               c10::str(images.front().sizes()) +
                               "; a list is read as one tensor, so its images must share a shape");
  }
  if (images.empty()) return at::empty({0}, at::kByte);
  return at::stack(images);
}

}  // namespace

at::Tensor mds_decode_tensor(const std::string& encoding, std::string_view v, const std::string& where) {
  const auto [name, args] = split_encoding(encoding);
  auto need = [&](size_t bytes) {
    if (v.size() < bytes)
      throw std::runtime_error(where + ": a '" + encoding + "' value of " + std::to_string(v.size()) + " bytes");
  };
  if (name == "int") {
    need(8);
    return at::scalar_tensor(static_cast<int64_t>(read_le<int64_t>(v.data())), at::kLong);
  }
  if (name == "str_int") return at::scalar_tensor(std::stoll(std::string(v)), at::kLong);
  if (name == "str_float") return at::scalar_tensor(std::stod(std::string(v)), at::kDouble);
  if (const Dtype* d = dtype_by_name(name)) {
    need(d->bytes);
    return values(*d, v.data(), 1).reshape({});
  }
  if (name == "jpeg") return decode_jpeg(v, where);
  if (name == "png") return decode_png(v, where);
  if (name == "jpeg_array" || name == "jpegarray") return decode_image_list(v, 0, "jpeg", where);
  if (name == "list[pil]" || name == "list[jpeg]" || name == "list[png]")
    return decode_image_list(v, 4, name.substr(5, name.size() - 6), where);
  if (name == "pil") {
    need(12);
    const uint32_t w = read_le<uint32_t>(v.data()), h = read_le<uint32_t>(v.data() + 4),
                   mode_size = read_le<uint32_t>(v.data() + 8);
    need(12 + mode_size);
    const std::string mode(v.substr(12, mode_size));
    const int64_t channels = mode == "L" ? 1 : mode == "RGB" ? 3 : mode == "RGBA" ? 4 : 0;
    if (channels == 0) throw std::runtime_error(where + ": pil mode '" + mode + "' (expected L, RGB or RGBA)");
    need(12 + mode_size + static_cast<size_t>(w) * h * channels);
    at::Tensor hwc = at::empty({h, w, channels}, at::kByte);
    std::memcpy(hwc.data_ptr(), v.data() + 12 + mode_size, static_cast<size_t>(w) * h * channels);
    return hwc.permute({2, 0, 1}).contiguous();
  }
  if (name == "ndarray") {
    size_t pos = 0;
    const auto colon = args.find(':');
    const std::string dtype_name = args.substr(0, colon);
    const Dtype* d = nullptr;
    if (!dtype_name.empty()) {
      d = dtype_by_name(dtype_name);
    } else {
      need(1);
      d = dtype_by_code(static_cast<unsigned char>(v[0]));
      pos = 1;
    }
    if (!d) throw std::runtime_error(where + ": unknown ndarray dtype");
    std::vector<int64_t> shape;
    if (colon != std::string::npos) {
      const std::string dims = args.substr(colon + 1);
      for (size_t b = 0; b <= dims.size();) {
        const size_t e = std::min(dims.find(',', b), dims.size());
        shape.push_back(std::stoll(dims.substr(b, e - b)));
        b = e + 1;
      }
    } else {
      need(pos + 1);
      const auto byte = static_cast<unsigned char>(v[pos++]);
      const int ndim = byte >> 2, width = 1 << (byte % 4);
      need(pos + static_cast<size_t>(ndim * width));
      for (int i = 0; i < ndim; ++i, pos += width) {
        uint64_t dim = 0;
        std::memcpy(&dim, v.data() + pos, width);
        shape.push_back(static_cast<int64_t>(dim));
      }
    }
    int64_t count = 1;
    for (int64_t s : shape) count *= s;
    need(pos + static_cast<size_t>(count) * d->bytes);
    return values(*d, v.data() + pos, count).reshape(shape);
  }
  throw std::runtime_error(where + ": encoding '" + encoding + "' is not a tensor");
}

void zstd_decompress_file(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + from + "'");
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  write_file_atomically(to, [&](const ByteSink& sink) {
    std::vector<char> inbuf(ZSTD_DStreamInSize()), outbuf(ZSTD_DStreamOutSize());
    size_t last = 0;
    while (in) {
      in.read(inbuf.data(), static_cast<std::streamsize>(inbuf.size()));
      ZSTD_inBuffer input{inbuf.data(), static_cast<size_t>(in.gcount()), 0};
      while (input.pos < input.size) {
        ZSTD_outBuffer output{outbuf.data(), outbuf.size(), 0};
        last = ZSTD_decompressStream(ctx.get(), &output, &input);
        if (ZSTD_isError(last))
          throw std::runtime_error("'" + from + "' is not valid zstd data: " + ZSTD_getErrorName(last));
        sink(outbuf.data(), output.pos);
      }
    }
    if (last != 0) throw std::runtime_error("'" + from + "' is truncated (zstd frame incomplete)");
  });
}

std::string file_digest(const std::string& path, const std::string& algorithm) {
  const EVP_MD* md = algorithm == "sha1"       ? EVP_sha1()
                     : algorithm == "sha224"   ? EVP_sha224()
                     : algorithm == "sha256"   ? EVP_sha256()
                     : algorithm == "sha384"   ? EVP_sha384()
                     : algorithm == "sha512"   ? EVP_sha512()
                     : algorithm == "md5"      ? EVP_md5()
                     : algorithm == "sha3_256" ? EVP_sha3_256()
                                               : nullptr;
  if (!md) return "";
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), md, nullptr);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + path + "'");
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx.get(), out, &n);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < n; ++i) {
    s += hex[out[i] >> 4];
    s += hex[out[i] & 15];
  }
  return s;
}

}  // namespace composer::detail
