#pragma once
// A sealed prepare of op `op` with a body of `body_bytes` bytes (each the op's low byte), for the replica-plane tests.
#include <cstddef>
#include <cstdint>

#include "consensus/message.h"

namespace rill::consensus::testing {

inline message prepare_of(std::uint64_t op, std::size_t body_bytes = 40) {
  message m;
  m.h.cmd = command::prepare;
  m.h.cluster = 7;
  m.h.op = op;
  m.h.operation = operation_user_min;
  m.body.assign(body_bytes, std::byte{static_cast<unsigned char>(op)});
  seal(m);
  return m;
}

}  // namespace rill::consensus::testing
