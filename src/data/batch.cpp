#include "composer/data/batch.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace composer {

Batch::Batch(at::Tensor input, at::Tensor target) {
  fields_.emplace_back("input", std::move(input));
  fields_.emplace_back("target", std::move(target));
}

Batch::Batch(std::vector<std::pair<std::string, at::Tensor>> fields) : fields_(std::move(fields)) {}

bool Batch::has(const std::string& key) const {
  for (const auto& f : fields_)
    if (f.first == key) return true;
  return false;
}

std::vector<std::string> Batch::keys() const {
  std::vector<std::string> k;
  for (const auto& f : fields_) k.push_back(f.first);
  return k;
}

size_t Batch::index_of(const BatchKey& key) const {
  if (const auto* i = std::get_if<int64_t>(&key)) {
    if (*i < 0 || static_cast<size_t>(*i) >= fields_.size()) {
      throw std::out_of_range("Batch has no field at position " + std::to_string(*i) + " (it has " +
                              std::to_string(fields_.size()) + " fields)");
    }
    return static_cast<size_t>(*i);
  }
  const auto& name = std::get<std::string>(key);
  for (size_t i = 0; i < fields_.size(); ++i)
    if (fields_[i].first == name) return i;
  std::string present;
  for (const auto& f : fields_) present += (present.empty() ? "" : ", ") + f.first;
  throw std::out_of_range("Batch has no field '" + name + "' (fields: " + present + ")");
}

at::Tensor& Batch::at(const BatchKey& key) { return fields_[index_of(key)].second; }
const at::Tensor& Batch::at(const BatchKey& key) const { return fields_[index_of(key)].second; }

void Batch::set(const BatchKey& key, at::Tensor value) {
  if (const auto* name = std::get_if<std::string>(&key); name && !has(*name)) {
    fields_.emplace_back(*name, std::move(value));
    return;
  }
  fields_[index_of(key)].second = std::move(value);
}

Batch Batch::to(const c10::Device& device, bool non_blocking) const {
  Batch out;
  for (const auto& [k, t] : fields_)  // already there: no call (a dispatched op per field and step)
    out.fields_.emplace_back(k, t.defined() && t.device() != device ? t.to(device, non_blocking) : t);
  return out;
}

int64_t Batch::num_samples() const {
  int64_t n = -1;
  for (const auto& [k, t] : fields_) {
    if (!t.defined() || t.dim() == 0) continue;
    if (n >= 0 && t.size(0) != n) {
      throw std::invalid_argument("Batch fields disagree on the number of samples: '" + k + "' has " +
                                  std::to_string(t.size(0)) + ", earlier fields have " + std::to_string(n));
    }
    n = t.size(0);
  }
  if (n < 0) throw std::invalid_argument("Batch has no tensor with a sample dimension");
  return n;
}

int64_t Batch::num_tokens() const { return has("input_ids") ? at(std::string("input_ids")).numel() : 0; }

std::vector<Batch> Batch::split(int64_t microbatch_size) const {
  if (microbatch_size <= 0) {
    throw std::invalid_argument("microbatch size must be positive, got " + std::to_string(microbatch_size));
  }
  const int64_t n = num_samples();
  std::vector<Batch> out;
  for (int64_t start = 0; start < n; start += microbatch_size) {
    const int64_t len = std::min(microbatch_size, n - start);
    Batch mb;
    for (const auto& [k, t] : fields_)
      mb.fields_.emplace_back(k, (t.defined() && t.dim() > 0) ? t.narrow(0, start, len) : t);
    out.push_back(std::move(mb));
  }
  return out;
}

}  // namespace composer
