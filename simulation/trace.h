#pragma once
// trace: the record of one simulated run. Every event updates a running XXH3-64 hash (the run's fingerprint: same
// seed and build, same hash); events of interest for study are also written as JSON lines when a file is given.
//
// A line: {"tick":T,"event":"view_change","replica":1,"view":4,...}. Events: fault (crash, restart, partition,
// heal, rot), view (a replica's status or view changed), commit (an op first applied anywhere: the canonical
// history), ack (a client got its reply; latency in ticks), liveness (the phase change), result.
#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rill::simulation {

class trace {
 public:
  trace();
  ~trace();
  trace(const trace&) = delete;
  trace& operator=(const trace&) = delete;

  // Write JSON lines to `path` (truncated). Returns false when it cannot be opened.
  bool open(const std::string& path);

  using field = std::pair<std::string_view, std::int64_t>;
  // An event with integer fields (and an optional string field "what").
  void event(std::uint64_t tick, std::string_view name, std::initializer_list<field> fields,
             std::string_view what = {});
  // Hash-only input: internal steps that should change the fingerprint without filling the file.
  void mix(std::uint64_t value);

  [[nodiscard]] std::uint64_t hash() const;
  [[nodiscard]] std::uint64_t events() const noexcept { return events_; }

 private:
  XXH3_state_t* state_;
  std::FILE* file_ = nullptr;
  std::uint64_t events_ = 0;
  std::string line_;
};

}  // namespace rill::simulation
