// Small string helpers shared inside the library (not public API).
#pragma once

#include <string>

namespace composer::detail {

/// ASCII lower case.
std::string to_lower(std::string s);
/// `s` without leading and trailing blanks (spaces, tabs, newlines).
std::string trim(const std::string& s);
/// Python's str(float): the shortest string that round-trips, with ".0" on whole numbers ("0.1", "2.0", "1e-05").
std::string python_float_str(double v);
/// Python's float(s): surrounding whitespace, '_' between digits, a sign, "inf"/"infinity"/"nan" in any case; false
/// when `s` is not a float literal (hexadecimal and empty strings are not). Out-of-range values become +-inf, as in
/// Python.
bool parse_python_float(const std::string& s, double& out);

}  // namespace composer::detail
