// Checking error messages: what a call throws as std::invalid_argument.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace composer::testing {

/// The message of the std::invalid_argument `f` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

/// The message of any std::exception `f` throws (object-store, checkpoint and data errors), or "(no error)".
inline std::string any_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

/// Fails unless `f` throws std::invalid_argument with `needle` in its message.
inline void expect_error_containing(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    FAIL() << "expected an error mentioning " << needle;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace composer::testing
