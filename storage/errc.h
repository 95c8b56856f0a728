#pragma once
// Errors of the storage layer. Every fallible storage call returns rill::expected<T> whose error carries one of
// these codes (or a system errno code for I/O failures, see io_error()) and a detail naming the file, offset or
// byte position concerned.
#include <string>
#include <system_error>

#include "base/expected.h"

namespace rill::storage {

enum class errc : int {
  invalid_batch = 1,        // a record batch that does not parse: lengths, magic, record framing (detail: where)
  crc_mismatch,             // stored CRC-32C differs from the computed one
  batch_too_large,          // a batch (or its declared uncompressed size) over the configured limit
  unsupported_compression,  // a codec other than none/zstd
  compression_error,        // zstd failed to compress or decompress
  io_error,                 // a file operation failed (the detail has the errno text and the file)
  no_space,                 // the disk is full (ENOSPC/EDQUOT); nothing of the failed write remains
  fenced,                   // the partition refuses writes: a failed fsync or an uncut failed write; run recovery
  overloaded,               // too many pending bytes; retriable
  offset_out_of_range,      // the requested offset is below the log start or beyond the log end
  corrupt_data,             // a file on disk failed verification (index, superblock, segment)
  not_found,                // no such file or partition
  invalid_argument,         // a caller-supplied value that breaks a documented precondition of a public call
  closed,                   // the log is closed or shutting down
  unsupported_attributes,   // a producer batch with the transactional or control attribute bit set
  invalid_producer_fields,  // a producer batch whose producer id, epoch and base sequence do not agree
  superseded,               // a replica's write given up before it landed: a later write replaced its op, or the
                            // replica's log no longer reaches it (not a failure of the disk: nothing is fenced)
  unavailable,              // a replicated group answered nothing in time (no primary with a quorum); retriable
  removed,                  // a replica's read of an op whose batch retention removed (below its durable checkpoint:
                            // kept by design no longer, not lost; nothing is marked faulty)
};

const std::error_category& storage_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), storage_category()};
}

// Builds an error from a negative errno result of a file operation. ENOSPC and EDQUOT map to errc::no_space; every
// other errno to errc::io_error. `what` names the operation and file ("fdatasync 000...0.log").
rill::error io_error(int negative_errno, const std::string& what);

inline rill::unexpected make_unexpected(errc e, std::string detail) {
  return rill::unexpected(make_error_code(e), std::move(detail));
}

}  // namespace rill::storage

template <>
struct std::is_error_code_enum<rill::storage::errc> : std::true_type {};
