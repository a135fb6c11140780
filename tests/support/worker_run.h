// Runs a test's worker process to the end and keeps what it printed (stdout and stderr, in order).
#pragma once

#include "support/process.h"

#include <chrono>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace composer::testing {

struct WorkerResult {
  int status;
  std::string output;
};

inline WorkerResult run_worker(const std::vector<std::string>& argv, double timeout_s = 120) {
  ChildProcess p(argv);
  std::string line, all;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline && p.read_line(line, timeout_s)) all += line + "\n";
  return {p.wait(), all};
}

/// `composer-cpp launch -n N [EXTRA...] -- COMMAND...` as an argv.
inline std::vector<std::string> launch_argv(const std::string& composer_cpp, int n,
                                            const std::vector<std::string>& command,
                                            const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv{composer_cpp, "launch", "-n", std::to_string(n)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

/// The numbers after `prefix` on the lines of `output` that start with it (after an optional "[rank R] " tag when
/// `rank_tag` is given, as composer-cpp launch prefixes its ranks' lines).
inline std::vector<double> printed_values(const std::string& output, const std::string& prefix,
                                          const std::string& rank_tag = "") {
  std::vector<double> values;
  std::istringstream in(output);
  std::string line;
  const std::string start = rank_tag + prefix;
  while (std::getline(in, line))
    if (line.rfind(start, 0) == 0) values.push_back(std::stod(line.substr(start.size())));
  return values;
}

/// The rest of each line of `output` that starts with `prefix`, on every rank (after any "[rank R] " tag).
inline std::vector<std::string> printed_words(const std::string& output, const std::string& prefix) {
  std::vector<std::string> words;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("[rank ", 0) == 0 && line.find("] ") != std::string::npos) line = line.substr(line.find("] ") + 2);
    if (line.rfind(prefix, 0) == 0) words.push_back(line.substr(prefix.size()));
  }
  return words;
}

/// "NAME VALUE" after `prefix` on each line of a worker's output that has it.
inline std::map<std::string, double> printed_pairs(const std::string& output, const std::string& prefix) {
  std::map<std::string, double> values;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find(prefix);
    if (at == std::string::npos) continue;
    std::istringstream fields(line.substr(at + prefix.size()));
    std::string name;
    double value = 0;
    fields >> name >> value;
    values[name] = value;
  }
  return values;
}

}  // namespace composer::testing
