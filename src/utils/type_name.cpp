#include "composer/utils/type_name.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace composer {

std::string class_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status),
                                                   std::free);
  std::string name = status == 0 ? demangled.get() : type.name();
  if (auto lt = name.find('<'); lt != std::string::npos) name.erase(lt);  // drop template arguments
  if (auto colon = name.rfind("::"); colon != std::string::npos) name.erase(0, colon + 2);
  if (name.size() > 4 && name.compare(name.size() - 4, 4, "Impl") == 0) name.erase(name.size() - 4);  // torch modules
  return name;
}

}  // namespace composer
