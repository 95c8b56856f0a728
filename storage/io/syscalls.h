#pragma once
// Executes one io::request with plain blocking system calls and stores its result. Shared by sync_engine (which
// calls it inside poll()) and by uring_engine's helper thread (for operations io_uring cannot do here).
#include "storage/io/engine.h"

namespace rill::storage::io {

void execute_blocking(request& r) noexcept;

// The open(2) flags for request::flags (open_flag bits); O_CLOEXEC always.
int posix_open_flags(std::uint32_t flags) noexcept;

}  // namespace rill::storage::io
