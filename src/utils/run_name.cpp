#include "composer/utils/run_name.h"

#include <array>
#include <chrono>
#include <cstdlib>
#include <random>

namespace composer {

std::string resolve_run_name(const std::string& name) {
  if (!name.empty()) return name;
  for (const char* var : {"COMPOSER_RUN_NAME", "RUN_NAME"})
    if (const char* v = std::getenv(var); v && *v) return v;
  static const std::array<const char*, 16> adjectives{"amber",  "brisk",  "calm",  "daring", "eager", "fuzzy",
                                                      "gentle", "hidden", "icy",   "jolly",  "keen",  "lucky",
                                                      "mellow", "nimble", "quiet", "rapid"};
  static const std::array<const char*, 16> nouns{"otter",  "falcon", "cedar",  "comet",  "harbor", "lynx",
                                                 "meadow", "nebula", "orchid", "pebble", "quartz", "raven",
                                                 "summit", "tundra", "walrus", "zephyr"};
  std::random_device rd;
  const auto now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  return std::to_string(now.count()) + "-" + adjectives[rd() % adjectives.size()] + "-" + nouns[rd() % nouns.size()];
}

}  // namespace composer
