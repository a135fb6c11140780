#include "composer/formats/safetensors.h"

#include "composer/utils/atomic_file.h"
#include "formats/detail/zip_verify.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <set>
#include <stdexcept>

namespace composer {
namespace {

const std::vector<std::pair<at::ScalarType, std::string>>& dtypes() {
  static const std::vector<std::pair<at::ScalarType, std::string>> d{
      {at::kDouble, "F64"}, {at::kFloat, "F32"}, {at::kHalf, "F16"}, {at::kBFloat16, "BF16"}, {at::kLong, "I64"},
      {at::kInt, "I32"},    {at::kShort, "I16"}, {at::kChar, "I8"},  {at::kByte, "U8"},       {at::kBool, "BOOL"}};
  return d;
}

}  // namespace

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  std::set<std::string> names;
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (!names.insert(name).second) throw std::invalid_argument("safetensors: duplicate tensor name '" + name + "'");
    std::string dtype;
    for (const auto& [st, s] : dtypes())
      if (st == t.scalar_type()) dtype = s;
    if (dtype.empty())
      throw std::invalid_argument("safetensors: tensor '" + name + "' has a dtype safetensors cannot store");
    const at::Tensor c = t.detach().to(at::kCPU).contiguous();
    const size_t bytes = c.numel() * c.element_size();
    header[name] = {{"dtype", dtype}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(c);
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h += ' ';  // align the data to 8 bytes
  std::vector<char> out(8 + h.size() + offset);
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, h.data(), h.size());
  size_t pos = 8 + h.size();
  for (const auto& c : data) {
    const size_t bytes = c.numel() * c.element_size();
    if (bytes) std::memcpy(out.data() + pos, c.data_ptr(), bytes);
    pos += bytes;
  }
  write_file_atomically(path, out);
}

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  detail::ByteSource file;
  try {
    file = detail::file_bytes(path_);
  } catch (const std::runtime_error&) {
    throw std::runtime_error("safetensors file '" + path_ + "' cannot be opened");
  }
  read_ = file.read;
  const uint64_t size = file.size;
  unsigned char len[8] = {};
  if (size < 8) throw std::runtime_error("safetensors file '" + path_ + "' is truncated");
  const auto read_header = [this](uint64_t offset, void* dst, uint64_t n) {
    try {
      read_(offset, dst, n);
    } catch (const std::runtime_error& e) {  // "cannot be read: <the system's reason>"
      throw std::runtime_error("safetensors file '" + path_ + "' " + e.what());
    }
  };
  read_header(0, len, 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (n > size - 8) throw std::runtime_error("safetensors file '" + path_ + "' has a header past the end of the file");
  std::string text(n, '\0');
  read_header(8, text.data(), n);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("safetensors file '" + path_ + "' has a malformed header: " + e.what());
  }
  const uint64_t base = 8 + n;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& e = it.value();
    Entry entry{at::kFloat, e.at("shape").get<std::vector<int64_t>>()};
    bool known = false;
    for (const auto& [t, s] : dtypes())
      if (s == e.at("dtype").get<std::string>()) entry.dtype = t, known = true;
    if (!known) throw std::runtime_error("safetensors file '" + path_ + "': unknown dtype for '" + it.key() + "'");
    entry.numel = c10::multiply_integers(entry.shape);
    const auto offsets = e.at("data_offsets").get<std::vector<uint64_t>>();
    const uint64_t bytes = static_cast<uint64_t>(entry.numel) * c10::elementSize(entry.dtype);
    if (offsets.size() != 2 || offsets[1] > size - base || offsets[0] > offsets[1] || offsets[1] - offsets[0] != bytes)
      throw std::runtime_error("safetensors file '" + path_ + "': bad data offsets for '" + it.key() + "'");
    entry.begin = base + offsets[0];
    names_.push_back(it.key());
    index_.emplace(it.key(), std::move(entry));
  }
}

const SafetensorsFile::Entry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) throw std::runtime_error("safetensors file '" + path_ + "' has no tensor '" + name + "'");
  return it->second;
}

at::Tensor SafetensorsFile::tensor(const std::string& name) const {
  const Entry& e = entry(name);
  return read_part(name, 0, e.numel).view(e.shape);
}

at::Tensor SafetensorsFile::read_part(const std::string& name, int64_t offset, int64_t numel) const {
  const Entry& e = entry(name);
  if (offset < 0 || numel < 0 || offset + numel > e.numel) {
    throw std::out_of_range("safetensors file '" + path_ + "': elements [" + std::to_string(offset) + ", " +
                            std::to_string(offset + numel) + ") of '" + name + "', which has " +
                            std::to_string(e.numel));
  }
  at::Tensor part = at::empty({numel}, at::TensorOptions().dtype(e.dtype));
  if (numel == 0) return part;
  const auto element = static_cast<uint64_t>(c10::elementSize(e.dtype));
  try {
    read_(e.begin + static_cast<uint64_t>(offset) * element, part.data_ptr(), static_cast<uint64_t>(numel) * element);
  } catch (const std::runtime_error& error) {
    throw std::runtime_error("safetensors file '" + path_ + "' could not be read at '" + name + "' (" + error.what() +
                             ")");
  }
  return part;
}

NamedTensors read_safetensors(const std::string& path) {
  const SafetensorsFile file(path);
  NamedTensors out;
  for (const auto& name : file.names()) out.emplace_back(name, file.tensor(name));
  return out;
}

}  // namespace composer
