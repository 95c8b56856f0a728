#pragma once
// Executes one io::request with plain blocking system calls and stores its result. Shared by sync_engine (which
// calls it inside poll()) and by uring_engine's helper thread (for operations io_uring cannot do here).
#include "storage/io_engine.h"

namespace rill::storage::io {

void execute_blocking(request& r) noexcept;

}  // namespace rill::storage::io
