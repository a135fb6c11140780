#include "composer/formats/safetensors.h"

#include "composer/utils/atomic_file.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstring>
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

NamedTensors read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("safetensors file '" + path + "' cannot be opened");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8) throw std::runtime_error("safetensors file '" + path + "' is truncated");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[static_cast<size_t>(i)])) << (8 * i);
  if (8 + n > bytes.size())
    throw std::runtime_error("safetensors file '" + path + "' has a header past the end of the file");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(std::string(bytes.data() + 8, n));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("safetensors file '" + path + "' has a malformed header: " + e.what());
  }
  NamedTensors out;
  const size_t base = 8 + n;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& e = it.value();
    at::ScalarType st = at::kFloat;
    bool known = false;
    for (const auto& [t, s] : dtypes())
      if (s == e.at("dtype").get<std::string>()) st = t, known = true;
    if (!known) throw std::runtime_error("safetensors file '" + path + "': unknown dtype for '" + it.key() + "'");
    const auto shape = e.at("shape").get<std::vector<int64_t>>();
    const auto offsets = e.at("data_offsets").get<std::vector<size_t>>();
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(st));
    if (offsets.size() != 2 || base + offsets[1] > bytes.size() ||
        offsets[1] - offsets[0] != static_cast<size_t>(t.numel()) * t.element_size()) {
      throw std::runtime_error("safetensors file '" + path + "': bad data offsets for '" + it.key() + "'");
    }
    if (t.numel()) std::memcpy(t.data_ptr(), bytes.data() + base + offsets[0], offsets[1] - offsets[0]);
    out.emplace_back(it.key(), t);
  }
  return out;
}

}  // namespace composer
