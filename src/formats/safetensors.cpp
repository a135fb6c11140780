#include "composer/formats/safetensors.h"

#include "composer/utils/atomic_file.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
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
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw std::runtime_error("safetensors file '" + path_ + "' cannot be opened");
  const auto size = static_cast<uint64_t>(std::filesystem::file_size(path_));
  unsigned char len[8] = {};
  if (size < 8 || !in.read(reinterpret_cast<char*>(len), 8))
    throw std::runtime_error("safetensors file '" + path_ + "' is truncated");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (n > size - 8) throw std::runtime_error("safetensors file '" + path_ + "' has a header past the end of the file");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
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
  // Unbuffered: a part can be one row's slice (a tensor-parallel split), where a buffered stream would read 8 KiB.
  std::ifstream in;
  in.rdbuf()->pubsetbuf(nullptr, 0);
  in.open(path_, std::ios::binary);
  const auto element = static_cast<uint64_t>(c10::elementSize(e.dtype));
  in.seekg(static_cast<std::streamoff>(e.begin + static_cast<uint64_t>(offset) * element));
  if (!in || !in.read(static_cast<char*>(part.data_ptr()), static_cast<std::streamsize>(numel * element)))
    throw std::runtime_error("safetensors file '" + path_ + "' could not be read at '" + name + "'");
  return part;
}

NamedTensors read_safetensors(const std::string& path) {
  const SafetensorsFile file(path);
  NamedTensors out;
  for (const auto& name : file.names()) out.emplace_back(name, file.tensor(name));
  return out;
}

}  // namespace composer
