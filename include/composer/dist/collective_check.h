// A check run before each collective a strategy starts inside a forward or backward pass (FSDP's all-gathers and
// reductions), while one is in effect on this thread. Automatic microbatching puts its attempt's check in effect (an
// all-reduce that learns whether a rank ran out of memory, and throws on the others if one did), so a rank that ran
// out of memory, which waits in the attempt's closing all-reduce, never meets another collective: every collective of
// an attempt is preceded by the check on every rank, and the check's all-reduce is what the closing one pairs with.
#pragma once

#include <functional>

namespace composer::dist {

/// Puts `check` in effect on this thread until destroyed (the previous one back then). Not copyable.
class CollectiveCheck {
 public:
  explicit CollectiveCheck(std::function<void()> check);
  ~CollectiveCheck();
  CollectiveCheck(const CollectiveCheck&) = delete;
  CollectiveCheck& operator=(const CollectiveCheck&) = delete;

 private:
  std::function<void()> previous_;
};

/// Whether a check is in effect on this thread.
bool collective_check_active();

/// Runs the check in effect on this thread, if any; a strategy calls it right before starting a collective (after
/// allocating what the collective needs, so that an allocation failure comes before the check).
void check_before_collective();

}  // namespace composer::dist
