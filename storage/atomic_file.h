#pragma once
// Atomic replacement of small metadata files (design: "unique temp file, fsync, rename, fsync the directory").
//
// write_file_atomic(dir, name, content): writes dir/name.tmp (created 0600, truncated), fdatasyncs it, closes it,
// renames it over dir/name and fsyncs dir. After a crash at any point, dir/name holds either its old content or
// the new one, never a mix; a leftover name.tmp is harmless (overwritten by the next write, deleted by
// remove_stale_temps). The temp name is unique per target file because every rill file has exactly one writer
// (design: one writer per file), which also keeps simulated runs byte-for-byte reproducible.
#include <optional>
#include <string>
#include <vector>

#include "base/expected.h"
#include "base/task.h"
#include "storage/io/engine.h"

namespace rill::storage {

inline constexpr const char* temp_suffix = ".tmp";

task<expected<void>> write_file_atomic(io::engine& e, std::string dir, std::string name,
                                       std::vector<std::byte> content);

// The whole file, or nullopt if it does not exist; an error if it is larger than bytes_max or unreadable.
task<expected<std::optional<std::vector<std::byte>>>> read_whole_file(io::engine& e, std::string path,
                                                                      std::uint64_t bytes_max);

[[nodiscard]] bool is_temp_name(const std::string& name) noexcept;

}  // namespace rill::storage
