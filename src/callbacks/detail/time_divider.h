// Seconds per unit of a callback's time_unit option (SpeedMonitor, RuntimeEstimator).
#pragma once

#include <stdexcept>
#include <string>

namespace composer::callbacks::detail {

/// 1, 60, 3600 or 86400 for seconds, minutes, hours, days; throws std::invalid_argument naming `who`.time_unit.
inline double seconds_per(const std::string& unit, const std::string& who) {
  if (unit == "seconds") return 1.0;
  if (unit == "minutes") return 60.0;
  if (unit == "hours") return 3600.0;
  if (unit == "days") return 86400.0;
  throw std::invalid_argument(who + ".time_unit '" + unit + "' must be one of seconds, minutes, hours, days");
}

}  // namespace composer::callbacks::detail
