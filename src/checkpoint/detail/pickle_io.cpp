#include "checkpoint/detail/pickle_io.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>

namespace composer::detail {

void pickle_to(const c10::IValue& value, const ByteSink& sink) {
  std::vector<char> pickle;  // the small pickle program; tensor bytes go to their own records
  torch::jit::Pickler pickler([&](const char* data, size_t size) { pickle.insert(pickle.end(), data, data + size); });
  pickler.protocol();
  pickler.pushIValue(value);
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
  return torch::jit::readArchiveAndTensors("data", "", "", c10::nullopt, c10::nullopt, c10::nullopt, reader);
}

}  // namespace composer::detail
