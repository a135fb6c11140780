// What an asynchronous checkpoint save needs (CheckpointSaverOptions::save_async): a copy of the payload that shares
// no memory with the training state, and a thread that writes it while training goes on.
#pragma once

#include <ATen/core/ivalue.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace composer::detail {

/// A deep copy of a checkpoint payload (dicts, lists, tuples, tensors) whose tensors are on the host, contiguous and
/// their own memory; other values are shared (they are immutable).
c10::IValue host_copy(const c10::IValue& payload);

/// `write` running on its own thread.
class BackgroundWrite {
 public:
  explicit BackgroundWrite(std::function<void()> write);
  /// Joins the thread; an error it had is dropped (wait() is where errors are read).
  ~BackgroundWrite();
  BackgroundWrite(const BackgroundWrite&) = delete;
  BackgroundWrite& operator=(const BackgroundWrite&) = delete;
  /// Waits for the write; "" when it succeeded, else its error.
  std::string wait();
  /// Whether the write has ended (wait() then returns at once).
  bool done() const;

 private:
  std::string error_;  // before thread_: the thread may write them as soon as it starts
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace composer::detail
