// The project environment's Python (.venv, made by tools/install_deps.sh) for tests that compare with PyTorch or
// MosaicML Composer: run a script there, and skip (fail under CI=true) when it or a module it needs is missing.
#pragma once

#include "support/data_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace composer::testing {

/// COMPOSER_PYTHON (CMake passes the .venv interpreter), else <source>/.venv/bin/python.
inline std::string python() {
  const char* p = std::getenv("COMPOSER_PYTHON");
  if (p && *p) return p;
  return source_dir() + "/.venv/bin/python";
}

/// Quotes `s` for /bin/sh.
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// Empty when python() imports every module in `modules` (space-separated), else why not. A success is remembered
/// in a marker file (per interpreter, its modification time and the modules), so the suite's many peer tests do not
/// each pay for importing Composer once more just to check that they can.
inline std::string python_missing(const std::string& modules) {
  namespace fs = std::filesystem;
  if (!fs::exists(python())) return python() + " does not exist (run tools/install_deps.sh)";
  std::error_code ec;
  const auto stamp = fs::last_write_time(fs::canonical(python(), ec), ec).time_since_epoch().count();
  const fs::path marker =
      fs::temp_directory_path() /
      ("composer_python_ok_" +
       std::to_string(std::hash<std::string>{}(python() + "|" + modules + "|" + std::to_string(stamp))));
  if (fs::exists(marker)) return "";
  std::string imports;
  for (std::istringstream in(modules); in;) {
    std::string m;
    in >> m;
    if (!m.empty()) imports += "import " + m + "; ";
  }
  const std::string cmd = shell_quote(python()) + " -c " + shell_quote(imports) + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return python() + " cannot import " + modules + " (run tools/install_deps.sh)";
  std::ofstream(marker) << modules << "\n";
  return "";
}

struct PythonResult {
  int status = -1;
  std::string output;  // stdout and stderr together
};

/// Runs python() with `args` (each shell-quoted), capturing its output.
inline PythonResult run_python(const std::vector<std::string>& args) {
  std::string cmd = shell_quote(python());
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " 2>&1";
  PythonResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int st = ::pclose(pipe);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

/// A script under tests/peer/.
inline std::string peer_script(const std::string& name) { return source_dir() + "/tests/peer/" + name; }

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs the peer script `script` (tests/peer/) on `requests` (a JSON file it reads as argv[1]) and returns the JSON
/// it wrote to argv[2]; a failed run is a test failure showing its output.
inline nlohmann::json ask_peer(const std::string& script, const nlohmann::json& requests) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("composer_peer_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string in = (dir / "requests.json").string(), out = (dir / "answers.json").string();
  std::ofstream(in) << requests.dump();
  const auto py = run_python({peer_script(script), in, out});
  EXPECT_EQ(py.status, 0) << py.output;
  nlohmann::json answers = nlohmann::json::parse(read_text(out));  // throws (a test error) when nothing was written
  fs::remove_all(dir);
  return answers;
}

}  // namespace composer::testing

/// Skips the test when the project environment lacks `modules`, except under CI=true where that is a failure.
#define COMPOSER_REQUIRE_PYTHON(modules)                                        \
  do {                                                                          \
    const std::string why_ = ::composer::testing::python_missing(modules);      \
    if (!why_.empty()) {                                                        \
      if (::composer::testing::in_ci()) FAIL() << "missing under CI: " << why_; \
      GTEST_SKIP() << why_;                                                     \
    }                                                                           \
  } while (0)
