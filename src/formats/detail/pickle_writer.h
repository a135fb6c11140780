// PickleWriter: writes a Python pickle program (protocol 2) opcode by opcode, for objects Python must rebuild as
// its own classes (DCP's Metadata dataclasses), which LibTorch's Pickler cannot express. No memo: every object is
// written where it occurs.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace composer::detail {

class PickleWriter {
 public:
  PickleWriter() { out_ += "\x80\x02"; }

  void none() { out_ += 'N'; }
  void boolean(bool v) { out_ += v ? '\x88' : '\x89'; }
  void integer(int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      out_ += 'J';
      raw(static_cast<int32_t>(v));
    } else {
      out_ += '\x8a';  // LONG1: 8 bytes, two's complement, little-endian
      out_ += '\x08';
      raw(v);
    }
  }
  void string(const std::string& s) {
    out_ += 'X';
    raw(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  /// Pushes module.name (GLOBAL).
  void global(const std::string& module, const std::string& name) { out_ += "c" + module + "\n" + name + "\n"; }
  void mark() { out_ += '('; }
  /// The items since the mark as a tuple.
  void tuple() { out_ += 't'; }
  void empty_tuple() { out_ += ')'; }
  void empty_dict() { out_ += '}'; }
  /// Key-value pairs since the mark into the dict below the mark.
  void set_items() { out_ += 'u'; }
  void empty_list() { out_ += ']'; }
  /// Items since the mark onto the list below the mark.
  void appends() { out_ += 'e'; }
  /// callable(*args): the callable, then the args tuple, on the stack.
  void reduce() { out_ += 'R'; }
  /// cls.__new__(cls, *args): the class, then the args tuple.
  void newobj() { out_ += '\x81'; }
  /// obj.__setstate__(state) or obj.__dict__.update(state): the object, then the state.
  void build() { out_ += 'b'; }
  /// An instance of module.name made without __init__ (NEWOBJ with no arguments); follow with its state and build().
  void new_object(const std::string& module, const std::string& name) {
    global(module, name);
    empty_tuple();
    newobj();
  }
  std::string finish() {
    out_ += '.';
    return std::move(out_);
  }

 private:
  template <class T>
  void raw(T v) {  // little-endian hosts only (as torch.save's tensor records)
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_.append(b, sizeof(T));
  }
  std::string out_;
};

}  // namespace composer::detail
