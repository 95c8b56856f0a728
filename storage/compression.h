#pragma once
// zstd compression of a batch's records region (libzstd).
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/expected.h"

namespace rill::storage {

// Appends the zstd frame of `input` to `out`. The frame declares its content size.
expected<void> zstd_compress(std::span<const std::byte> input, int level, std::vector<std::byte>& out);

// The content size a zstd frame declares, nullopt when it declares none, or an error when the bytes are not a zstd
// frame. Reads only the frame header.
expected<std::optional<std::uint64_t>> zstd_declared_size(std::span<const std::byte> frame);

// Decompresses every frame in `input` into `out` (replacing its contents). Fails, without growing `out` past
// `output_bytes_max`, when the output would exceed it.
expected<void> zstd_decompress(std::span<const std::byte> input, std::uint64_t output_bytes_max,
                               std::vector<std::byte>& out);

}  // namespace rill::storage
