#pragma once
// sync_engine: io::engine over plain blocking system calls, executed inside poll() in submission order. For tools
// and tests that have no ring; never on a shard thread (it blocks).
#include <deque>

#include "storage/io/engine.h"

namespace rill::storage::io {

class sync_engine final : public engine {
 public:
  ~sync_engine() override;
  void submit(request& r) override;
  std::size_t poll(bool wait) override;
  [[nodiscard]] std::size_t in_flight() const override { return queue_.size(); }
  [[nodiscard]] const char* name() const override { return "sync"; }

 private:
  std::deque<request*> queue_;
};

}  // namespace rill::storage::io
