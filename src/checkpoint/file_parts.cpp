#include "checkpoint/detail/file_parts.h"

#include "checkpoint/detail/part_boxes.h"
#include "formats/detail/python_pickle.h"
#include "formats/detail/zip_verify.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>

namespace composer::detail {
namespace {

using KeyPath = std::vector<std::string>;

// LibTorch's archive reader over a ByteSource.
class SourceAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit SourceAdapter(ByteSource source) : source_(std::move(source)) {}
  size_t size() const override { return source_.size; }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= source_.size) return 0;
    const size_t m = static_cast<size_t>(std::min<uint64_t>(n, source_.size - pos));
    source_.read(pos, buf, m);
    return m;
  }

 private:
  ByteSource source_;
};

// The archive's tensors, unpickled on the meta device, and where their storages' bytes lie.
class LazyArchive {
 public:
  explicit LazyArchive(const ZipArchive& zip) : zip_(zip) {
    for (const auto& r : zip_.records()) {  // "<archive>/data/0" -> "data/0"
      const size_t slash = r.name.find('/');
      if (slash != std::string::npos) by_name_[r.name.substr(slash + 1)] = &r;
    }
  }
  LazyStorages& lazy() { return lazy_; }

  // Elements [first, first + n) of the storage behind `t` (storage indices), into `dst` (n elements of t's dtype).
  void read(const at::Tensor& t, int64_t first, int64_t n, void* dst) const {
    const auto it = lazy_.records.find(t.storage().unsafeGetStorageImpl());
    if (it == lazy_.records.end()) throw std::runtime_error("a tensor's storage is not in the archive");
    const auto rec = by_name_.find(it->second);
    if (rec == by_name_.end()) throw std::runtime_error("the archive has no stored record '" + it->second + "'");
    const auto bytes = static_cast<uint64_t>(t.element_size());
    zip_.read(*rec->second, static_cast<uint64_t>(first) * bytes, dst, static_cast<uint64_t>(n) * bytes);
  }

  // `t` whole, as a CPU tensor of its shape and strides.
  at::Tensor whole(const at::Tensor& t) const {
    int64_t span = t.numel() == 0 ? 0 : 1;  // the storage elements its view reaches
    for (int64_t d = 0; d < t.dim(); ++d) span += (t.size(d) - 1) * t.stride(d);
    if (t.numel() == 0) return at::empty(t.sizes(), t.options().device(c10::kCPU));
    at::Tensor flat = at::empty({span}, t.options().device(c10::kCPU));
    read(t, t.storage_offset(), span, flat.data_ptr());
    return flat.as_strided(t.sizes(), t.strides());
  }

  // The elements of the box (`offsets`, `sizes`) of a contiguous `t`, read run by run (each run a contiguous range:
  // the box's last partial dimension with the full ones after it).
  at::Tensor box(const at::Tensor& t, const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes) const {
    const std::vector<int64_t> shape = t.sizes().vec();
    const int64_t dims = static_cast<int64_t>(shape.size());
    at::Tensor out = at::empty(sizes, t.options().device(c10::kCPU));
    if (out.numel() == 0) return out;
    int64_t k = dims - 1;  // runs span dimensions k.. (those after k whole)
    while (k > 0 && sizes[k] == shape[k]) --k;
    int64_t run = 1;
    for (int64_t d = std::max<int64_t>(k, 0); d < dims; ++d) run *= sizes[d];
    std::vector<int64_t> index(static_cast<size_t>(std::max<int64_t>(k, 0)), 0);
    auto* dst = static_cast<char*>(out.data_ptr());
    for (int64_t done = 0; done < out.numel(); done += run) {
      int64_t flat = 0;
      for (int64_t d = 0; d < dims; ++d) flat = flat * shape[d] + offsets[d] + (d < k ? index[d] : 0);
      read(t, t.storage_offset() + flat, run, dst);
      dst += run * t.element_size();
      for (int64_t d = k - 1; d >= 0; --d) {  // next run: the index over dimensions before k, row-major
        if (++index[d] < sizes[d]) break;
        index[d] = 0;
      }
    }
    return out;
  }

 private:
  const ZipArchive& zip_;
  LazyStorages lazy_;
  std::map<std::string, const ZipRecord*> by_name_;
};

// This rank's part `range` of the contiguous tensor `t`, read by its boxes.
at::Tensor read_part(const LazyArchive& a, const at::Tensor& t, const WantedPart& range) {
  at::Tensor part = at::empty({range.end - range.begin}, t.options().device(c10::kCPU));
  if (!range.piece) {
    a.read(t, t.storage_offset() + range.begin, range.end - range.begin, part.data_ptr());
    return part;
  }
  for (const auto& b : placed_boxes(t.sizes().vec(), range.begin, range.end, range.piece))
    box_view(part, range.begin, b).copy_(a.box(t, b.offsets, b.sizes));
  return part;
}

// `value` with its lazy tensors read: whole, or, for those of a dict under "state" that `wanted` asks a part of,
// their parts into `parts` and their keys dropped.
c10::IValue resolve(const LazyArchive& a, const c10::IValue& value, KeyPath& path, bool in_state,
                    const PartsWanted& wanted, std::vector<ShardedEntry>& parts) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    return t.device().is_meta() ? c10::IValue(a.whole(t)) : value;
  }
  if (value.isGenericDict()) {
    auto d = value.toGenericDict();
    std::vector<c10::IValue> keys;
    for (const auto& e : d) keys.push_back(e.key());
    for (const auto& key : keys) {
      path.push_back(key.isString() ? key.toStringRef() : key.isInt() ? std::to_string(key.toInt()) : "?");
      const c10::IValue v = d.at(key);
      const bool under_state = in_state || (path.size() == 1 && path[0] == "state");
      std::optional<WantedPart> range;
      if (in_state && wanted && v.isTensor() && v.toTensor().device().is_meta() && v.toTensor().is_contiguous())
        range = wanted(KeyPath(path.begin() + 1, path.end()), v.toTensor().sizes().vec());
      if (range) {
        const at::Tensor& t = v.toTensor();
        parts.push_back({KeyPath(path.begin() + 1, path.end()),
                         dist::LocalPart{t.sizes().vec(), t.scalar_type(), range->begin, range->end,
                                         read_part(a, t, *range), range->piece}});
        (void)d.erase(key);
      } else {
        d.insert_or_assign(key, resolve(a, v, path, under_state, wanted, parts));
      }
      path.pop_back();
    }
    return d;
  }
  if (value.isList()) {
    auto l = value.toList();
    for (size_t i = 0; i < l.size(); ++i) l.set(i, resolve(a, l.get(i), path, false, wanted, parts));
    return l;
  }
  if (value.isTuple()) {
    std::vector<c10::IValue> elements;
    for (const auto& e : value.toTupleRef().elements()) elements.push_back(resolve(a, e, path, false, wanted, parts));
    return c10::ivalue::Tuple::create(std::move(elements));
  }
  return value;
}

}  // namespace

c10::IValue read_file_parts(const ZipArchive& zip, const PartsWanted& wanted, std::vector<ShardedEntry>& parts) {
  LazyArchive archive(zip);
  c10::IValue payload;
  {
    caffe2::serialize::PyTorchStreamReader reader(std::make_shared<SourceAdapter>(zip.source()));
    payload = unpickle_python_archive(reader, archive.lazy());
  }
  KeyPath where;
  std::vector<ShardedEntry> read;
  c10::IValue out = resolve(archive, payload, where, false, wanted, read);
  parts.insert(parts.end(), read.begin(), read.end());
  return out;
}

}  // namespace composer::detail
