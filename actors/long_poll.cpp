// long_poll: where a poll's read starts, and what a parked poll waits for.
#include "actors/long_poll.h"

#include <limits>

#include <algorithm>

namespace rill::actors {

storage::read_request read_request_for(const proto::PollRequest& r, std::optional<std::int64_t> resume_at,
                                       std::optional<std::int64_t> stored_offset, offset_t log_start, offset_t log_end,
                                       std::uint64_t default_max_bytes) {
  RILL_ASSERT(log_start <= log_end);
  storage::read_request q;
  q.max_bytes = r.max_bytes() ? r.max_bytes() : default_max_bytes;
  q.max_records = r.max_records() ? r.max_records() : UINT32_MAX;
  if (resume_at) {
    q.start = storage::read_start::offset;
    q.offset = std::clamp(offset_t(*resume_at), log_start, log_end);
    return q;
  }
  switch (r.strategy().kind()) {
    case proto::PollStrategy::OFFSET:
      q.start = storage::read_start::offset;
      q.offset = offset_t(static_cast<std::int64_t>(r.strategy().value()));
      break;
    case proto::PollStrategy::TIMESTAMP:
      q.start = storage::read_start::timestamp;
      // A timestamp beyond i64 is later than every record: the same as the largest one.
      q.timestamp = timestamp_ms_t(static_cast<std::int64_t>(
          std::min<std::uint64_t>(r.strategy().value(), std::numeric_limits<std::int64_t>::max())));
      break;
    case proto::PollStrategy::FIRST:
      q.start = storage::read_start::first;
      break;
    case proto::PollStrategy::LAST:
      q.start = storage::read_start::last;
      break;
    case proto::PollStrategy::NEXT: {
      const bool named = r.consumer().kind_case() == proto::Consumer::kName;
      if (named && stored_offset) {
        q.start = storage::read_start::offset;
        q.offset = std::max(offset_t(*stored_offset), log_start);
      } else {
        q.start = storage::read_start::first;
      }
      break;
    }
    default:
      q.start = storage::read_start::first;
      break;
  }
  return q;
}

std::optional<offset_t> wanted_offset(const proto::PollRequest& r, std::optional<std::int64_t> resume_at,
                                      const storage::read_result& empty_read) {
  RILL_ASSERT(empty_read.batches == 0);
  const bool moves = !resume_at && r.strategy().kind() == proto::PollStrategy::NEXT &&
                     r.consumer().kind_case() == proto::Consumer::kName;
  if (moves) {
    return std::nullopt;
  }
  return empty_read.next_offset;
}

}  // namespace rill::actors
