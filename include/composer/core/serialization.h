// Helpers to build the dicts State::state_dict() is made of (dicts of tensors and primitives, which Python's
// torch.load reads as plain dicts).
#pragma once

#include <ATen/core/ivalue.h>

#include <string>

namespace composer {

using Dict = c10::impl::GenericDict;

/// A new string-keyed dict of any values.
Dict new_dict();
/// The value at `key`; throws std::out_of_range naming `what` and the key when it is missing.
c10::IValue dict_get(const Dict& dict, const std::string& key, const std::string& what);

}  // namespace composer
