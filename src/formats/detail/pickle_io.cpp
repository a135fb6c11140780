#include "formats/detail/pickle_io.h"

#include "formats/detail/python_pickle.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <sstream>

namespace composer::detail {

namespace {

// `value` with every list as a list of Any: LibTorch pickles a typed list (List[int], List[Tensor], ...) through a
// torch.jit._pickle global, which Python's torch.load(weights_only=True) refuses.
c10::IValue untyped(const c10::IValue& value) {
  if (value.isList()) {
    c10::impl::GenericList out(c10::AnyType::get());
    for (const auto& e : value.toList()) out.push_back(untyped(e));
    return out;
  }
  if (value.isGenericDict()) {
    const auto d = value.toGenericDict();
    c10::impl::GenericDict out(d.keyType(), c10::AnyType::get());
    for (const auto& e : d) out.insert(e.key(), untyped(e.value()));
    return out;
  }
  if (value.isTuple()) {
    std::vector<c10::IValue> elements;
    for (const auto& e : value.toTupleRef().elements()) elements.push_back(untyped(e));
    return c10::ivalue::Tuple::create(std::move(elements));
  }
  return value;
}

}  // namespace

void pickle_to(const c10::IValue& value, const ByteSink& sink) {
  std::vector<char> pickle;  // the small pickle program; tensor bytes go to their own records
  // No type tags on dicts and lists (torch.jit._pickle.restore_type_tag): plain pickle that weights_only accepts.
  torch::jit::Pickler pickler([&](const char* data, size_t size) { pickle.insert(pickle.end(), data, data + size); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(untyped(value));
  pickler.stop();
  // No exception may cross the zip writer (its destructor writes again): keep the first sink error, report the
  // bytes as written so the writer finishes, then rethrow.
  std::exception_ptr error;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) -> size_t {
      if (!error) {
        try {
          sink(data, size);
        } catch (...) {
          error = std::current_exception();
        }
      }
      return size;
    });
    torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
    writer.writeEndOfFile();
  }
  if (error) std::rethrow_exception(error);
}

c10::IValue unpickle_file(const std::string& path) {
  caffe2::serialize::PyTorchStreamReader reader(path);
  try {
    return torch::jit::readArchiveAndTensors("data", "", "", c10::nullopt, c10::nullopt, c10::nullopt, reader);
  } catch (const c10::Error&) {
    // A file Python wrote with objects LibTorch's unpickler refuses or mistakes (a Composer checkpoint's timedeltas,
    // OrderedDicts, numpy RNG state). Our reader says what is wrong if it cannot read the file either.
  }
  return unpickle_python_archive(reader);  // the archive stays open: no second read of the zip directory
}

c10::IValue unpickle_bytes(const std::string& bytes) {
  std::istringstream in(bytes);
  caffe2::serialize::PyTorchStreamReader reader(&in);
  try {
    return torch::jit::readArchiveAndTensors("data", "", "", c10::nullopt, c10::nullopt, c10::nullopt, reader);
  } catch (const c10::Error&) {
    // Python objects LibTorch's unpickler refuses, as in unpickle_file.
  }
  return unpickle_python_archive(reader);
}

}  // namespace composer::detail
