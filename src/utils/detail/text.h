// Small string helpers shared inside the library (not public API).
#pragma once

#include <string>

namespace composer::detail {

/// ASCII lower case.
std::string to_lower(std::string s);
/// Python's str(float): the shortest string that round-trips, with ".0" on whole numbers ("0.1", "2.0", "1e-05").
std::string python_float_str(double v);

}  // namespace composer::detail
