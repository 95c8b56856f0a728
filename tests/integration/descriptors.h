#pragma once
// Counting a process's open descriptors (/proc/PID/fd), for the tests of the descriptor limits (limits.open_files_max:
// docs/operations.md, Limits). Test-only.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <string>
#include <thread>

namespace rill::testing {

inline std::size_t open_descriptors(pid_t pid) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++n;
  }
  return n;
}

// The descriptors of `pid` once they are at most `bound` (partitions still opening, files still being closed), or
// what it holds at the deadline.
inline std::size_t descriptors_settled_at_most(pid_t pid, std::size_t bound,
                                               std::chrono::seconds within = std::chrono::seconds(60)) {
  std::size_t n = open_descriptors(pid);
  for (auto deadline = std::chrono::steady_clock::now() + within; n > bound && std::chrono::steady_clock::now() < deadline;
       n = open_descriptors(pid)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return n;
}

}  // namespace rill::testing
