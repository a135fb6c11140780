// What the stopping callbacks (EarlyStopper, ThresholdStopper) share about the metric they watch.
#pragma once

#include "utils/detail/text.h"

#include <map>
#include <stdexcept>
#include <string>

namespace composer::detail {

/// "a, b, c" of a map's keys, or "none".
template <class Map>
std::string join_keys(const Map& map) {
  std::string out;
  for (const auto& entry : map) out += (out.empty() ? "" : ", ") + entry.first;
  return out.empty() ? "none" : out;
}

/// Composer's default direction: a metric whose name holds loss, error or perplexity is minimised.
inline bool minimises(const std::string& monitor) {
  const std::string m = to_lower(monitor);
  return m.find("loss") != std::string::npos || m.find("error") != std::string::npos ||
         m.find("perplexity") != std::string::npos;
}

/// The monitored value; as Composer, a missing one is an error (a misspelt monitor would otherwise never stop the run).
inline double require_metric(const std::string& who, const std::string& monitor, const std::string& label,
                             const std::map<std::string, double>& values) {
  auto it = values.find(monitor);
  if (it == values.end())
    throw std::invalid_argument(who + ": no metric '" + monitor + "' for dataloader label '" + label +
                                "'; the metrics there are: " + join_keys(values));
  return it->second;
}

}  // namespace composer::detail
