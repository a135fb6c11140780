// Reading torch.save files that Python wrote with objects LibTorch's unpickler refuses (MosaicML Composer's
// checkpoints hold datetime.timedelta wall-clock times, numpy arrays in their RNG states, OrderedDicts, enums).
// A small pickle machine (protocols 2-5) over the file's zip records, which turns what it knows into IValues and
// every other Python object into a marker dict {"__python_object__": "module.name"}, so that code reading such a
// value fails naming it instead of reading garbage:
//   torch tensors and parameters      -> tensors (storages from the archive, dtype from the storage class)
//   dict, OrderedDict                 -> dict          list, set, frozenset -> list       tuple -> tuple
//   str, bytes                        -> string        int, float, bool, None -> themselves
//   datetime.timedelta                -> float seconds torch.device -> its string
#pragma once

#include <ATen/core/ivalue.h>

#include <string>

namespace caffe2::serialize {
class PyTorchStreamReader;
}

namespace composer::detail {

/// Reads the pickle of an open torch.save archive (pickle_io.h's unpickle_file calls it when LibTorch's unpickler
/// fails). Throws std::runtime_error naming the record or opcode when the archive is not readable.
c10::IValue unpickle_python_archive(caffe2::serialize::PyTorchStreamReader& reader);

/// Whether `value` is the marker of a Python object this reader does not convert.
bool is_python_object(const c10::IValue& value);

}  // namespace composer::detail
