#include "formats/detail/python_pickle.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>

#include <cstring>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace composer::detail {

namespace {

using Dict = c10::impl::GenericDict;

// A str-keyed dict of any values (a Python object marker, a dataclass state).
Dict new_dict() { return Dict(c10::StringType::get(), c10::AnyType::get()); }

}  // namespace
namespace {

constexpr const char* kGlobalKey = "__python_global__";
constexpr const char* kObjectKey = "__python_object__";
constexpr const char* kItemsKey = "__python_items__";

c10::IValue marker(const char* key, const std::string& name) {
  Dict d = new_dict();
  d.insert(key, name);
  return d;
}

std::string marker_name(const c10::IValue& v, const char* key) {
  if (!v.isGenericDict()) return "";
  const Dict d = v.toGenericDict();
  if (!d.contains(key) || !d.at(key).isString()) return "";
  return d.at(key).toStringRef();
}

// An object marker with what it was made from: "__args__" (the REDUCE / NEWOBJ arguments) and, after BUILD,
// "__state__" (what __setstate__ would get).
c10::IValue object_marker(const std::string& name, const c10::IValue& args) {
  Dict d = new_dict();
  d.insert(kObjectKey, name);
  d.insert("__args__", args);
  return d;
}

// The dtype of a legacy typed storage class ("torch.FloatStorage").
at::ScalarType storage_dtype(const std::string& cls) {
  static const std::unordered_map<std::string, at::ScalarType> types = {
      {"torch.FloatStorage", at::kFloat},
      {"torch.DoubleStorage", at::kDouble},
      {"torch.HalfStorage", at::kHalf},
      {"torch.BFloat16Storage", at::kBFloat16},
      {"torch.LongStorage", at::kLong},
      {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort},
      {"torch.CharStorage", at::kChar},
      {"torch.ByteStorage", at::kByte},
      {"torch.BoolStorage", at::kBool},
      {"torch.UntypedStorage", at::kByte},
      {"torch.ComplexFloatStorage", at::kComplexFloat},
      {"torch.ComplexDoubleStorage", at::kComplexDouble}};
  auto it = types.find(cls);
  if (it == types.end()) throw std::runtime_error("pickle: unsupported tensor storage type '" + cls + "'");
  return it->second;
}

std::vector<int64_t> int_tuple(const c10::IValue& v) {
  std::vector<int64_t> out;
  for (const auto& e : v.toTupleRef().elements()) out.push_back(e.toInt());
  return out;
}

// A UTF-8 string whose code points are all below 256, as the bytes they stand for (_codecs.encode(s, "latin1")).
std::string latin1_bytes(const std::string& utf8) {
  std::string out;
  for (size_t i = 0; i < utf8.size(); ++i) {
    const auto c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if ((c >> 5) == 0x6 && i + 1 < utf8.size()) {
      out += static_cast<char>(((c & 0x1F) << 6) | (static_cast<unsigned char>(utf8[++i]) & 0x3F));
    } else {
      throw std::runtime_error("pickle: _codecs.encode of a string that is not latin-1");
    }
  }
  return out;
}

class Machine {
 public:
  Machine(std::string program, caffe2::serialize::PyTorchStreamReader* reader, LazyStorages* lazy = nullptr)
      : program_(std::move(program)), reader_(reader), lazy_(lazy) {}

  c10::IValue run() {
    while (true) {
      const auto op = u8();
      if (op == '.') return pop();
      step(op);
    }
  }

 private:
  // --- reading the program ---
  void need(size_t n) {
    if (pos_ + n > program_.size())
      throw std::runtime_error("pickle: the program ends early (at byte " + std::to_string(pos_) + ")");
  }
  uint8_t u8() {
    need(1);
    return static_cast<uint8_t>(program_[pos_++]);
  }
  template <class T>
  T little() {  // little-endian integer
    need(sizeof(T));
    T v;
    std::memcpy(&v, program_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string bytes(uint64_t n) {
    need(n);
    std::string s = program_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string line() {
    const auto nl = program_.find('\n', pos_);
    if (nl == std::string::npos) throw std::runtime_error("pickle: unterminated text argument");
    std::string s = program_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return s;
  }
  double big_endian_double() {
    need(8);
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(program_[pos_ + i]);
    pos_ += 8;
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  int64_t long_bytes(uint64_t n) {  // two's complement, little-endian, at most 8 bytes
    if (n > 8) throw std::runtime_error("pickle: an integer wider than 64 bits");
    const std::string b = bytes(n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(b[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);
    return static_cast<int64_t>(v);
  }

  // --- the stack ---
  c10::IValue pop() {
    if (stack_.empty()) throw std::runtime_error("pickle: stack underflow");
    c10::IValue v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  c10::IValue& top() {
    if (stack_.empty()) throw std::runtime_error("pickle: stack underflow");
    return stack_.back();
  }
  std::vector<c10::IValue> pop_mark() {
    if (marks_.empty()) throw std::runtime_error("pickle: no mark on the stack");
    const size_t start = marks_.back();
    marks_.pop_back();
    std::vector<c10::IValue> items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(start)),
                                   std::make_move_iterator(stack_.end()));
    stack_.resize(start);
    return items;
  }
  static c10::IValue tuple(std::vector<c10::IValue> items) { return c10::ivalue::Tuple::create(std::move(items)); }
  static void set_items(c10::IValue& target, const std::vector<c10::IValue>& kv) {
    if (!target.isGenericDict()) throw std::runtime_error("pickle: SETITEMS on something that is not a dict");
    auto d = target.toGenericDict();
    for (size_t i = 0; i + 1 < kv.size(); i += 2) {
      const c10::IValue& k = kv[i];
      if (k.isString() || k.isInt() || k.isDouble() || k.isBool() || k.isNone()) {
        d.insert_or_assign(k, kv[i + 1]);
        continue;
      }
      // A key IValue cannot hash (an object, as DCP's MetadataIndex, or a tuple): kept with its value in a list.
      if (!d.contains(kItemsKey)) d.insert(kItemsKey, new_list());
      d.at(kItemsKey).toList().push_back(tuple({k, kv[i + 1]}));
    }
  }
  static void append(c10::IValue& target, const std::vector<c10::IValue>& items) {
    if (!target.isList()) throw std::runtime_error("pickle: APPEND on something that is not a list");
    auto l = target.toList();
    for (const auto& v : items) l.push_back(v);
  }
  static c10::IValue new_list(const std::vector<c10::IValue>& items = {}) {
    c10::impl::GenericList l(c10::AnyType::get());
    for (const auto& v : items) l.push_back(v);
    return l;
  }

  // --- Python objects ---
  c10::IValue call(const c10::IValue& callable, const c10::IValue& args_value) {
    const std::string name = marker_name(callable, kGlobalKey);
    if (name.empty()) throw std::runtime_error("pickle: REDUCE on something that is not a Python global");
    const auto& args = args_value.toTupleRef().elements();
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      const at::Tensor& storage = args.at(0).toTensor();
      return at::empty({0}, storage.options())
          .set_(storage.storage(), args.at(1).toInt(), int_tuple(args.at(2)), int_tuple(args.at(3)));
    }
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state")
      return args.at(0);
    if (name == "collections.OrderedDict" || name == "builtins.dict") {
      Dict d(c10::AnyType::get(), c10::AnyType::get());
      if (!args.empty()) {
        for (const auto& kv : args.at(0).toList())
          d.insert_or_assign(kv.get().toTupleRef().elements().at(0), kv.get().toTupleRef().elements().at(1));
      }
      return d;
    }
    if (name == "datetime.timedelta") {
      double seconds = 0;
      const double scale[] = {86400.0, 1.0, 1e-6};
      for (size_t i = 0; i < args.size() && i < 3; ++i) seconds += scale[i] * static_cast<double>(args[i].toInt());
      return seconds;
    }
    if (name == "builtins.set" || name == "builtins.frozenset") return args.empty() ? new_list() : args.at(0);
    if (name == "torch.device") return args.at(0);
    if (name == "torch.Size") return args.empty() ? tuple({}) : args.at(0);
    if (name == "_codecs.encode") return latin1_bytes(args.at(0).toStringRef());
    if (name == "copyreg._reconstructor" && args.size() == 3) {  // a subclass of a builtin, e.g. TorchVersion(str)
      const std::string base = marker_name(args[1], kGlobalKey);
      if (base == "builtins.str" || base == "builtins.int" || base == "builtins.float") return args[2];
      return marker(kObjectKey, marker_name(args[0], kGlobalKey));
    }
    return object_marker(name, args_value);
  }

  c10::IValue persistent_load(const c10::IValue& pid_value) {
    const c10::ArrayRef<c10::IValue> pid = pid_value.toTupleRef().elements().asArrayRef();
    if (!reader_) throw std::runtime_error("pickle: a persistent id outside a torch.save archive");
    if (pid.size() < 5 || !pid[0].isString() || pid[0].toStringRef() != "storage") {
      throw std::runtime_error("pickle: unknown persistent id (expected a torch storage)");
    }
    const std::string key = pid[2].toStringRef();
    auto cached = storages_.find(key);
    if (cached != storages_.end()) return cached->second;
    const at::ScalarType dtype = storage_dtype(marker_name(pid[1], kGlobalKey));
    const int64_t numel = pid[4].toInt();
    const std::string record = "data/" + key;
    at::DataPtr data;
    size_t size = 0;
    if (numel > 0) {
      if (!reader_->hasRecord(record)) throw std::runtime_error("pickle: the archive has no record '" + record + "'");
      if (!lazy_) std::tie(data, size) = reader_->getRecord(record);
    }
    const size_t want = static_cast<size_t>(numel) * c10::elementSize(dtype);
    if (lazy_) {  // its shape without its bytes: the caller reads what it needs (and checks the record's size)
      at::Tensor t = at::empty({numel}, at::TensorOptions().dtype(dtype).device(c10::kMeta));
      lazy_->records[t.storage().unsafeGetStorageImpl()] = record;
      storages_.emplace(key, t);
      return t;
    }
    if (size < want) {
      throw std::runtime_error("pickle: record '" + record + "' holds " + std::to_string(size) +
                               " bytes, the tensor needs " + std::to_string(want));
    }
    c10::Storage storage(c10::Storage::use_byte_size_t(), want, std::move(data), nullptr, false);
    at::Tensor t = at::empty({0}, at::TensorOptions().dtype(dtype)).set_(storage);
    storages_.emplace(key, t);
    return t;
  }

  // Protocol 2 writes Python 2's module names (fix_imports), as Python's own unpickler maps them back.
  static c10::IValue global(std::string module, const std::string& name) {
    if (module == "__builtin__") module = "builtins";
    if (module == "copy_reg") module = "copyreg";
    return marker(kGlobalKey, module + "." + name);
  }

  void memo_put(uint64_t id) { memo_[id] = top(); }
  c10::IValue memo_get(uint64_t id) {
    auto it = memo_.find(id);
    if (it == memo_.end()) throw std::runtime_error("pickle: memo entry " + std::to_string(id) + " is missing");
    return it->second;
  }

  // One opcode of the program. The one function over the 80-line limit (tools/ci/check_sizes.py allows it): one case
  // per opcode of Python's pickle protocol, each a line or two; split up, the dispatch would be harder to check
  // against pickle.py's table, not easier.
  void step(uint8_t op) {
    switch (op) {
      case 0x80:
        u8();
        break;  // PROTO
      case 0x95:
        little<uint64_t>();
        break;  // FRAME
      case '(':
        marks_.push_back(stack_.size());
        break;
      case '}':
        stack_.emplace_back(Dict(c10::AnyType::get(), c10::AnyType::get()));
        break;
      case ']':
      case 0x8f:
        stack_.push_back(new_list());
        break;  // EMPTY_LIST, EMPTY_SET
      case ')':
        stack_.push_back(tuple({}));
        break;
      case 0x85: {
        auto a = pop();
        stack_.push_back(tuple({a}));
      } break;
      case 0x86: {
        auto b = pop(), a = pop();
        stack_.push_back(tuple({a, b}));
      } break;
      case 0x87: {
        auto c = pop(), b = pop(), a = pop();
        stack_.push_back(tuple({a, b, c}));
      } break;
      case 't':
        stack_.push_back(tuple(pop_mark()));
        break;
      case 'l':
      case 0x91:
        stack_.push_back(new_list(pop_mark()));
        break;  // LIST, FROZENSET
      case 'd': {
        auto kv = pop_mark();
        stack_.emplace_back(Dict(c10::AnyType::get(), c10::AnyType::get()));
        set_items(top(), kv);
      } break;
      case 'a': {
        auto v = pop();
        append(top(), {v});
      } break;
      case 'e':
      case 0x90: {
        auto items = pop_mark();
        append(top(), items);
      } break;  // APPENDS, ADDITEMS
      case 's': {
        auto v = pop(), k = pop();
        set_items(top(), {k, v});
      } break;
      case 'u': {
        auto kv = pop_mark();
        set_items(top(), kv);
      } break;
      case 'q':
        memo_put(u8());
        break;
      case 'r':
        memo_put(little<uint32_t>());
        break;
      case 0x94:
        memo_put(memo_.size());
        break;  // MEMOIZE
      case 'h':
        stack_.push_back(memo_get(u8()));
        break;
      case 'j':
        stack_.push_back(memo_get(little<uint32_t>()));
        break;
      case 'N':
        stack_.emplace_back();
        break;
      case 0x88:
        stack_.emplace_back(true);
        break;
      case 0x89:
        stack_.emplace_back(false);
        break;
      case 'J':
        stack_.emplace_back(static_cast<int64_t>(little<int32_t>()));
        break;
      case 'K':
        stack_.emplace_back(static_cast<int64_t>(u8()));
        break;
      case 'M':
        stack_.emplace_back(static_cast<int64_t>(little<uint16_t>()));
        break;
      case 0x8a: {
        const auto n = u8();
        stack_.emplace_back(long_bytes(n));
      } break;
      case 0x8b: {
        const auto n = little<uint32_t>();
        stack_.emplace_back(long_bytes(n));
      } break;
      case 'G':
        stack_.emplace_back(big_endian_double());
        break;
      case 'X':
      case 'B':
      case 'T':
        stack_.emplace_back(bytes(little<uint32_t>()));
        break;  // (BIN)UNICODE, BYTES, STRING
      case 0x8c:
      case 'C':
      case 'U':
        stack_.emplace_back(bytes(u8()));
        break;  // their short forms
      case 0x8d:
      case 0x8e:
      case 0x96:
        stack_.emplace_back(bytes(little<uint64_t>()));
        break;  // 8-byte lengths
      case 'c': {
        const std::string module = line();
        stack_.push_back(global(module, line()));
      } break;
      case 0x93: {
        auto name = pop(), module = pop();
        stack_.push_back(global(module.toStringRef(), name.toStringRef()));
      } break;
      case 'R':
      case 0x81: {
        auto args = pop(), callable = pop();
        stack_.push_back(call(callable, args));
      } break;  // REDUCE, NEWOBJ
      case 0x92: {
        pop();
        auto args = pop(), cls = pop();
        stack_.push_back(call(cls, args));
      } break;     // NEWOBJ_EX
      case 'b': {  // BUILD: an object marker keeps its state; other objects' state is dropped
        auto state = pop();
        if (top().isGenericDict() && top().toGenericDict().contains(kObjectKey))
          top().toGenericDict().insert_or_assign("__state__", state);
      } break;
      case 'Q': {
        auto pid = pop();
        stack_.push_back(persistent_load(pid));
      } break;
      case '0':
        pop();
        break;
      case '1':
        pop_mark();
        break;
      case '2':
        stack_.push_back(top());
        break;
      default: {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02x", op);
        throw std::runtime_error(std::string("pickle: unsupported opcode ") + hex + " at byte " +
                                 std::to_string(pos_ - 1));
      }
    }
  }

  std::string program_;
  size_t pos_ = 0;
  caffe2::serialize::PyTorchStreamReader* reader_;
  LazyStorages* lazy_;
  std::vector<c10::IValue> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, c10::IValue> memo_;
  std::unordered_map<std::string, at::Tensor> storages_;
};

}  // namespace

namespace {
c10::IValue run_archive(caffe2::serialize::PyTorchStreamReader& reader, LazyStorages* lazy) {
  if (reader.hasRecord("byteorder")) {
    auto [data, size] = reader.getRecord("byteorder");
    const std::string order(static_cast<const char*>(data.get()), size);
    if (order != "little") throw std::runtime_error("pickle: tensors stored " + order + "-endian");
  }
  auto [data, size] = reader.getRecord("data.pkl");
  return Machine(std::string(static_cast<const char*>(data.get()), size), &reader, lazy).run();
}
}  // namespace

c10::IValue unpickle_python_archive(caffe2::serialize::PyTorchStreamReader& reader) {
  return run_archive(reader, nullptr);
}

c10::IValue unpickle_python_archive(caffe2::serialize::PyTorchStreamReader& reader, LazyStorages& lazy) {
  return run_archive(reader, &lazy);
}

c10::IValue unpickle_python_bytes(const std::string& program) { return Machine(program, nullptr).run(); }

std::string python_object_name(const c10::IValue& value) { return marker_name(value, kObjectKey); }

c10::IValue python_object_state(const c10::IValue& value) {
  if (!is_python_object(value) || !value.toGenericDict().contains("__state__")) return c10::IValue();
  return value.toGenericDict().at("__state__");
}

bool is_python_object(const c10::IValue& value) { return !marker_name(value, kObjectKey).empty(); }

}  // namespace composer::detail
