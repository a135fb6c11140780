#pragma once

#include <string>
#include <typeinfo>

namespace composer {

/// The unqualified class name of a dynamic type ("DecoupledSGDW" for composer::optim::DecoupledSGDW), used for
/// Composer-style keys such as `lr-DecoupledSGDW/group0` and state-dict entries.
std::string class_name(const std::type_info& type);

template <class T>
std::string class_name_of(const T& object) {
  return class_name(typeid(object));
}

}  // namespace composer
