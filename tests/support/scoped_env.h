// ScopedEnv: environment variables set for a test's scope (child processes inherit them), restored after.
#pragma once

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

namespace composer::testing {

/// Sets environment variables for its lifetime and restores them after.
class ScopedEnv {
 public:
  void set(const std::string& name, const std::string& value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace composer::testing
