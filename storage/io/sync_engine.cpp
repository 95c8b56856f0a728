#include "storage/io/sync_engine.h"

#include "base/assert.h"
#include "storage/io/syscalls.h"

namespace rill::storage::io {

sync_engine::~sync_engine() {
  RILL_ASSERT(queue_.empty(), "sync_engine destroyed with {} requests in flight", queue_.size());
}

void sync_engine::submit(request& r) {
  queue_.push_back(&r);
}

std::size_t sync_engine::poll(bool /*wait*/) {
  // Runs what was queued when poll() began; requests submitted by these completions wait for the next poll().
  std::size_t n = queue_.size();
  std::size_t done = 0;
  while (n-- > 0) {
    request* r = queue_.front();
    queue_.pop_front();
    execute_blocking(*r);
    ++done;
    complete(*r);
  }
  return done;
}

}  // namespace rill::storage::io
