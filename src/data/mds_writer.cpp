#include "composer/data/mds_writer.h"

#include "data/detail/mds.h"
#include "utils/detail/text_file.h"

#include <ATen/ATen.h>
#include <zstd.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace composer {

namespace fs = std::filesystem;

namespace {

struct Column {
  std::string name, encoding;
  std::optional<int64_t> size;
  std::vector<int64_t> shape;  // of one sample
};

std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kByte:
      return "uint8";
    case at::kChar:
      return "int8";
    case at::kShort:
      return "int16";
    case at::kInt:
      return "int32";
    case at::kLong:
      return "int64";
    case at::kHalf:
      return "float16";
    case at::kFloat:
      return "float32";
    case at::kDouble:
      return "float64";
    default:
      return "";
  }
}

Column column_for(const std::string& name, const at::Tensor& sample) {
  Column c;
  c.name = name;
  c.shape = sample.sizes().vec();
  const std::string dtype = dtype_name(sample.scalar_type());
  if (dtype.empty())
    throw std::invalid_argument("write_mds: field '" + name + "' has dtype " +
                                std::string(c10::toString(sample.scalar_type())) + ", which MDS cannot hold");
  if (sample.dim() == 0) {
    if (at::isIntegralType(sample.scalar_type(), /*includeBool=*/false)) {
      c.encoding = "int";
      c.size = 8;
    } else {
      c.encoding = sample.scalar_type() == at::kDouble ? "float64" : "float32";
      c.size = sample.scalar_type() == at::kDouble ? 8 : 4;
    }
  } else if (sample.scalar_type() == at::kByte && sample.dim() == 3 &&
             (sample.size(0) == 1 || sample.size(0) == 3 || sample.size(0) == 4)) {
    c.encoding = "pil";
  } else {
    std::string shape;
    for (int64_t d : c.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    c.encoding = "ndarray:" + dtype + ":" + shape;
    c.size = sample.numel() * static_cast<int64_t>(sample.element_size());
  }
  return c;
}

void append_value(std::string& out, const Column& c, const at::Tensor& v) {
  if (v.sizes().vec() != c.shape)
    throw std::invalid_argument("write_mds: field '" + c.name + "' changes shape between samples");
  if (c.encoding == "int") {
    const int64_t x = v.item<int64_t>();
    out.append(reinterpret_cast<const char*>(&x), 8);
  } else if (c.encoding == "float32") {
    const float x = v.item<float>();
    out.append(reinterpret_cast<const char*>(&x), 4);
  } else if (c.encoding == "float64") {
    const double x = v.item<double>();
    out.append(reinterpret_cast<const char*>(&x), 8);
  } else if (c.encoding == "pil") {
    const uint32_t h = static_cast<uint32_t>(v.size(1)), w = static_cast<uint32_t>(v.size(2));
    const std::string mode = v.size(0) == 1 ? "L" : v.size(0) == 3 ? "RGB" : "RGBA";
    const uint32_t header[3] = {w, h, static_cast<uint32_t>(mode.size())};
    out.append(reinterpret_cast<const char*>(header), 12);
    out += mode;
    const at::Tensor hwc = v.permute({1, 2, 0}).contiguous();
    out.append(static_cast<const char*>(hwc.data_ptr()), static_cast<size_t>(hwc.numel()));
  } else {
    const at::Tensor c_v = v.contiguous();
    out.append(static_cast<const char*>(c_v.data_ptr()), static_cast<size_t>(c_v.numel() * c_v.element_size()));
  }
}

// The samples of one shard laid out as MDS lays them: the count, count + 1 offsets, then the samples.
std::string shard_bytes(const std::vector<std::string>& samples) {
  const uint32_t count = static_cast<uint32_t>(samples.size());
  std::string data(4 * (count + 2), '\0');
  std::memcpy(data.data(), &count, 4);
  uint32_t offset = static_cast<uint32_t>(data.size());
  for (uint32_t i = 0; i <= count; ++i) {
    std::memcpy(data.data() + 4 + 4 * i, &offset, 4);
    if (i < count) offset += static_cast<uint32_t>(samples[i].size());
  }
  for (const auto& s : samples) data += s;
  return data;
}

// Writes the shards of one MDS directory as the samples come, and its index.json at the end.
class ShardWriter {
 public:
  ShardWriter(std::string out, const MdsWriterOptions& options) : out_(std::move(out)), options_(options) {
    const std::string& compression = options.compression();
    compression_ = compression.substr(0, compression.find(':'));
    if (!compression_.empty() && compression_ != "zstd")
      throw std::invalid_argument("write_mds: compression '" + compression + "': expected none or zstd[:level]");
    level_ = compression.find(':') == std::string::npos ? 3 : std::stoi(compression.substr(compression.find(':') + 1));
    if (options.size_limit() < 1) throw std::invalid_argument("write_mds: size_limit must be >= 1");
    if (fs::exists(fs::path(out_) / "index.json"))
      throw std::invalid_argument("write_mds: '" + out_ + "' already holds an index.json");
    fs::create_directories(out_);
  }

  std::vector<Column> columns;

  void add(std::string sample) {
    bytes_ += static_cast<int64_t>(sample.size());
    samples_.push_back(std::move(sample));
    if (bytes_ >= options_.size_limit()) flush();
  }

  // Writes the samples so far as the next shard.
  void flush() {
    if (samples_.empty()) return;
    const std::string data = shard_bytes(samples_);
    const std::string count = std::to_string(shards_.size());
    const std::string base = "shard." + std::string(5 - std::min<size_t>(5, count.size()), '0') + count + ".mds";
    nlohmann::json shard = header(static_cast<uint32_t>(samples_.size()));
    if (compression_.empty()) {
      shard["compression"] = nullptr;
      shard["raw_data"] = record(base, data);
      shard["zip_data"] = nullptr;
    } else {
      shard["compression"] = options_.compression();
      shard["raw_data"] = raw_entry(base, data);
      shard["zip_data"] = record(base + ".zstd", zstd(data));
    }
    shards_.push_back(shard);
    samples_.clear();
    bytes_ = 0;
  }

  // The last shard and the index; how many shards.
  int64_t finish() {
    flush();
    const std::string index = nlohmann::json{{"shards", shards_}, {"version", 2}}.dump(2);
    composer::detail::write_text_atomically((fs::path(out_) / "index.json").string(), index);
    return static_cast<int64_t>(shards_.size());
  }

 private:
  nlohmann::json header(uint32_t count) const {
    nlohmann::json shard = {{"column_encodings", nlohmann::json::array()},
                            {"column_names", nlohmann::json::array()},
                            {"column_sizes", nlohmann::json::array()},
                            {"format", "mds"},
                            {"hashes", options_.hashes()},
                            {"samples", count},
                            {"size_limit", options_.size_limit()},
                            {"version", 2}};
    for (const auto& c : columns) {
      shard["column_encodings"].push_back(c.encoding);
      shard["column_names"].push_back(c.name);
      shard["column_sizes"].push_back(c.size ? nlohmann::json(*c.size) : nlohmann::json());
    }
    return shard;
  }

  std::string zstd(const std::string& data) const {
    std::string zipped(ZSTD_compressBound(data.size()), '\0');
    const size_t z = ZSTD_compress(zipped.data(), zipped.size(), data.data(), data.size(), level_);
    if (ZSTD_isError(z)) throw std::runtime_error(std::string("write_mds: zstd failed: ") + ZSTD_getErrorName(z));
    zipped.resize(z);
    return zipped;
  }

  // The file `name` written with `content`, and its entry (basename, bytes, hashes).
  nlohmann::json record(const std::string& name, const std::string& content) const {
    const std::string path = (fs::path(out_) / name).string();
    composer::detail::write_text_atomically(path, content);
    nlohmann::json hashes = nlohmann::json::object();
    for (const auto& h : options_.hashes()) {
      const std::string d = detail::file_digest(path, h);
      if (d.empty()) throw std::invalid_argument("write_mds: hash '" + h + "' is not supported");
      hashes[h] = d;
    }
    return nlohmann::json{{"basename", name}, {"bytes", content.size()}, {"hashes", hashes}};
  }

  // A compressed shard's raw entry describes the decompressed bytes, hashed from a temporary file (only the
  // compressed file stays).
  nlohmann::json raw_entry(const std::string& base, const std::string& data) const {
    const std::string tmp = (fs::path(out_) / ("." + base + ".raw")).string();
    composer::detail::write_text_atomically(tmp, data);
    nlohmann::json raw = {{"basename", base}, {"bytes", data.size()}, {"hashes", nlohmann::json::object()}};
    for (const auto& h : options_.hashes()) raw["hashes"][h] = detail::file_digest(tmp, h);
    fs::remove(tmp);
    return raw;
  }

  std::string out_;
  const MdsWriterOptions& options_;
  std::string compression_;
  int level_ = 3;
  nlohmann::json shards_ = nlohmann::json::array();
  std::vector<std::string> samples_;
  int64_t bytes_ = 0;
};

}  // namespace

int64_t write_mds(const Dataset& dataset, const std::string& out, const MdsWriterOptions& options) {
  ShardWriter writer(out, options);
  const int64_t n = dataset.size();
  for (int64_t start = 0; start < n; start += 1024) {
    const Batch b = dataset.get_batch(at::arange(start, std::min(n, start + 1024), at::kLong));
    if (writer.columns.empty())
      for (const auto& [name, t] : b.fields()) writer.columns.push_back(column_for(name, t[0]));
    for (int64_t i = 0; i < b.num_samples(); ++i) {
      std::string sizes, values;
      size_t k = 0;
      for (const auto& [name, t] : b.fields()) {
        const Column& c = writer.columns[k++];
        const size_t before = values.size();
        append_value(values, c, t[i]);
        if (!c.size) {
          const uint32_t len = static_cast<uint32_t>(values.size() - before);
          sizes.append(reinterpret_cast<const char*>(&len), 4);
        }
      }
      writer.add(sizes + values);
    }
  }
  return writer.finish();
}

}  // namespace composer
