// Reading torch.save files that Python wrote with objects LibTorch's unpickler refuses (MosaicML Composer's
// checkpoints hold datetime.timedelta wall-clock times, numpy arrays in their RNG states, OrderedDicts, enums).
// A small pickle machine (protocols 2-5) over the file's zip records, which turns what it knows into IValues and
// every other Python object into a marker dict {"__python_object__": "module.name", "__args__", "__state__"}, so that
// code reading such a value fails naming it instead of reading garbage:
//   torch tensors and parameters      -> tensors (storages from the archive, dtype from the storage class)
//   dict, OrderedDict                 -> dict          list, set, frozenset -> list       tuple -> tuple
//   str, bytes                        -> string        int, float, bool, None -> themselves
//   datetime.timedelta                -> float seconds torch.device -> its string
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <unordered_map>

namespace caffe2::serialize {
class PyTorchStreamReader;
}

namespace composer::detail {

/// Reads the pickle of an open torch.save archive (pickle_io.h's unpickle_file calls it when LibTorch's unpickler
/// fails). Throws std::runtime_error naming the record or opcode when the archive is not readable.
c10::IValue unpickle_python_archive(caffe2::serialize::PyTorchStreamReader& reader);

/// The storages of an archive unpickled without reading them: each tensor is on the meta device (its shape, strides,
/// offset and dtype, no memory), its storage named here by its record ("data/0"), for the caller to read what it
/// needs of each (a sharded load: its part).
struct LazyStorages {
  std::unordered_map<const c10::StorageImpl*, std::string> records;
};
c10::IValue unpickle_python_archive(caffe2::serialize::PyTorchStreamReader& reader, LazyStorages& lazy);

/// The same machine over a bare pickle program (not a torch.save archive: no tensors), as pickle.dump writes.
c10::IValue unpickle_python_bytes(const std::string& program);

/// Whether `value` is the marker of a Python object this reader does not convert.
bool is_python_object(const c10::IValue& value);
/// A marker's class ("module.name"), or "" for any other value.
std::string python_object_name(const c10::IValue& value);
/// A marker's state as BUILD gave it (a dataclass's __dict__, or what its __getstate__ returned); None if none.
c10::IValue python_object_state(const c10::IValue& value);
/// Dict entries whose keys IValue cannot hash (objects such as a frozen dataclass, tuples) are kept, in order, as
/// (key, value) tuples in the list under the dict's key "__python_items__".

}  // namespace composer::detail
