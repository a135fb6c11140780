#include "formats/detail/dcp_metadata.h"

#include "formats/detail/pickle_writer.h"

#include <stdexcept>

namespace composer::detail {

std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "float32";
    case at::kDouble:
      return "float64";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kLong:
      return "int64";
    case at::kInt:
      return "int32";
    case at::kShort:
      return "int16";
    case at::kChar:
      return "int8";
    case at::kByte:
      return "uint8";
    case at::kBool:
      return "bool";
    default:
      throw std::invalid_argument(std::string("sharded checkpoint: tensors of dtype ") + c10::toString(t) +
                                  " are not supported");
  }
}

std::optional<at::ScalarType> dtype_from_name(const std::string& name) {
  for (at::ScalarType t : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong, at::kInt, at::kShort,
                           at::kChar, at::kByte, at::kBool})
    if ("torch." + dtype_name(t) == name) return t;
  return std::nullopt;
}

std::vector<int64_t> int_vector(const c10::IValue& v) {
  std::vector<int64_t> out;
  if (v.isTuple())
    for (const auto& e : v.toTupleRef().elements()) out.push_back(e.toInt());
  else
    for (const auto& e : v.toList()) out.push_back(e.get().toInt());
  return out;
}

namespace {

void write_size(PickleWriter& w, const std::vector<int64_t>& dims) {
  w.global("torch", "Size");
  w.mark();
  w.mark();
  for (int64_t d : dims) w.integer(d);
  w.tuple();
  w.tuple();
  w.reduce();
}

// A TensorStorageMetadata: properties (dtype, strided, contiguous), size, and the chunks' offsets and sizes.
void write_tensor_metadata(PickleWriter& w, const TensorInfo& t) {
  w.new_object(kDcpMetadataModule, "TensorStorageMetadata");
  w.empty_dict();
  w.mark();
  w.string("properties");
  w.new_object(kDcpMetadataModule, "TensorProperties");
  w.mark();  // its __getstate__ tuple: dtype, layout, requires_grad, memory format encoding, pin_memory
  w.global("torch", t.dtype);
  w.global("torch", "strided");
  w.boolean(false);
  w.global(kDcpMetadataModule, "_MEM_FORMAT_ENCODING");
  w.mark();
  w.integer(0);  // TORCH_CONTIGUOUS_FORMAT
  w.tuple();
  w.reduce();
  w.boolean(false);
  w.tuple();
  w.build();
  w.string("size");
  write_size(w, t.size);
  w.string("chunks");
  w.empty_list();
  w.mark();
  for (const auto& [offsets, sizes] : t.chunks) {
    w.new_object(kDcpMetadataModule, "ChunkStorageMetadata");
    w.empty_dict();
    w.mark();
    w.string("offsets");
    write_size(w, offsets);
    w.string("sizes");
    write_size(w, sizes);
    w.set_items();
    w.build();
  }
  w.appends();
  w.set_items();
  w.build();
}

// A storage_data entry: the MetadataIndex key (fqn, chunk offset or none) and the _StorageInfo value.
void write_storage_record(PickleWriter& w, const StorageRecord& r) {
  w.new_object(kDcpMetadataModule, "MetadataIndex");
  w.empty_dict();
  w.mark();
  w.string("fqn");
  w.string(r.fqn);
  w.string("offset");
  if (r.offsets)
    write_size(w, *r.offsets);
  else
    w.none();
  w.string("index");
  w.none();
  w.set_items();
  w.build();
  w.new_object("torch.distributed.checkpoint.filesystem", "_StorageInfo");
  w.empty_dict();
  w.mark();
  w.string("relative_path");
  w.string(r.file);
  w.string("offset");
  w.integer(r.offset);
  w.string("length");
  w.integer(r.length);
  w.set_items();
  w.build();
}

}  // namespace

std::string dcp_metadata_pickle(const std::vector<std::string>& order, const std::map<std::string, TensorInfo>& tensors,
                                const std::map<std::string, Path>& paths, const std::vector<StorageRecord>& storage) {
  PickleWriter w;
  w.new_object(kDcpMetadataModule, "Metadata");
  w.empty_dict();
  w.mark();
  w.string("state_dict_metadata");
  w.empty_dict();
  w.mark();
  for (const auto& fqn : order) {
    w.string(fqn);
    const auto t = tensors.find(fqn);
    if (t != tensors.end()) {
      write_tensor_metadata(w, t->second);
      continue;
    }
    w.new_object(kDcpMetadataModule, "BytesStorageMetadata");
    w.empty_dict();
    w.build();
  }
  w.set_items();
  w.string("planner_data");  // DCP's flatten mapping: flat key -> object path
  w.empty_dict();
  w.mark();
  for (const auto& fqn : order) {
    w.string(fqn);
    w.mark();
    for (const auto& p : paths.at(fqn)) p.isString() ? w.string(p.toStringRef()) : w.integer(p.toInt());
    w.tuple();
  }
  w.set_items();
  w.string("storage_data");
  w.empty_dict();
  w.mark();
  for (const auto& r : storage) write_storage_record(w, r);
  w.set_items();
  w.string("storage_meta");
  w.none();
  w.set_items();
  w.build();
  return w.finish();
}

}  // namespace composer::detail
