#include "composer/dist/collective_check.h"

#include <utility>

namespace composer::dist {
namespace {

thread_local std::function<void()> current;

}  // namespace

CollectiveCheck::CollectiveCheck(std::function<void()> check) : previous_(std::move(current)) {
  current = std::move(check);
}

CollectiveCheck::~CollectiveCheck() { current = std::move(previous_); }

bool collective_check_active() { return static_cast<bool>(current); }

void check_before_collective() {
  if (current) current();
}

}  // namespace composer::dist
