#include "composer/core/serialization.h"

#include <stdexcept>

namespace composer {

Dict new_dict() { return Dict(c10::StringType::get(), c10::AnyType::get()); }

c10::IValue dict_get(const Dict& dict, const std::string& key, const std::string& what) {
  auto it = dict.find(key);
  if (it == dict.end()) throw std::out_of_range(what + ": missing entry '" + key + "'");
  return it->value();
}

}  // namespace composer
