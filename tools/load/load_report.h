#pragma once
// load_report: what a load run measured (series of throughput and latency per role) and how it is printed: a text
// summary, one JSON object (--json), and a CSV of per-second figures (--output).
//
// Contracts: a series is shared by the threads of one role; each thread records through its own writer, which
// merges into the series once per second and when it is destroyed (so threads do not contend per message). Memory
// per series: one base/histogram (58 KiB) per second of the run, plus one per writer.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/expected.h"
#include "base/histogram.h"
#include "tools/load/load.h"

namespace rill::bench {

class series {
 public:
  using duration = std::chrono::steady_clock::duration;

  struct second {
    std::uint64_t messages = 0;
    std::uint64_t bytes = 0;
    histogram latency;
  };

  // One thread's handle. `at` is the time since the role's phase began; a negative one is clamped to 0.
  class writer {
   public:
    explicit writer(series& s) : series_(s) {}
    ~writer() { flush(); }
    writer(const writer&) = delete;
    writer& operator=(const writer&) = delete;

    void record(duration at, std::uint64_t messages, std::uint64_t bytes, std::optional<std::uint64_t> latency_ns);
    void latency(duration at, std::uint64_t ns);
    void flush();

   private:
    void move_to(duration at);
    series& series_;
    std::int64_t index_ = -1;  // the second `current_` holds
    second current_;
    duration last_at_{0};
  };

  [[nodiscard]] std::uint64_t messages() const noexcept { return messages_; }
  [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] const histogram& latency() const noexcept { return latency_; }
  // The latest `at` recorded by any writer (the end of the role's activity).
  [[nodiscard]] duration last_at() const noexcept { return last_at_; }
  [[nodiscard]] const std::vector<std::unique_ptr<second>>& seconds() const noexcept { return seconds_; }

 private:
  void merge(std::int64_t index, const second& s, duration last_at);

  std::mutex mu_;
  std::vector<std::unique_ptr<second>> seconds_;
  std::uint64_t messages_ = 0;
  std::uint64_t bytes_ = 0;
  histogram latency_;
  duration last_at_{0};
};

struct role_result {
  std::string name;             // produce | consume | end-to-end
  std::string latency_meaning;  // what one latency value measures
  double seconds = 0;           // the phase's length, for throughput
  const series* data = nullptr;
};

struct report {
  std::string system;
  load_mode mode = load_mode::produce;
  const load_options* options = nullptr;
  std::string settings;
  std::vector<role_result> roles;
};

// The text summary, or one JSON object when options->json.
void print_report(const report& r);
// Per-second rows: second, role, messages, msgs_per_s, mb_per_s, p50_us, p90_us, p99_us, p99_9_us, max_us.
expected<void> write_csv(const report& r, const std::string& path);

}  // namespace rill::bench
