#include "composer/core/state.h"

#include <algorithm>
#include <stdexcept>

namespace composer {

std::optional<double> State::get_elapsed_duration() const {
  if (!max_duration) return std::nullopt;
  return (timestamp.get(max_duration->unit()) / *max_duration).value();
}

void State::stop_training() {
  if (!max_duration) throw std::logic_error("stop_training: max_duration is not set");
  if (max_duration->unit() == TimeUnit::EPOCH) {
    max_duration = Time(timestamp.batch, TimeUnit::BATCH);
  } else {
    max_duration = timestamp.get(max_duration->unit());
  }
}

void State::set_dataloader(DataLoader* loader, const std::string& label, int64_t len) {
  dataloader = loader;
  dataloader_label = label;
  if (!loader) {
    dataloader_len.reset();
    return;
  }
  const auto full = loader->length();
  if (len < 0) {
    dataloader_len = full;
  } else {
    dataloader_len = full ? std::min(len, *full) : len;
  }
}

}  // namespace composer
