#include "storage/compression.h"

#include <zstd.h>

#include <algorithm>
#include <memory>

#include <fmt/core.h>

#include "storage/errc.h"

namespace rill::storage {

expected<void> zstd_compress(std::span<const std::byte> input, int level, std::vector<std::byte>& out) {
  const std::size_t bound = ZSTD_compressBound(input.size());
  const std::size_t old_size = out.size();
  out.resize(old_size + bound);
  const std::size_t n = ZSTD_compress(out.data() + old_size, bound, input.data(), input.size(), level);
  if (ZSTD_isError(n)) {
    out.resize(old_size);
    return make_unexpected(errc::compression_error, fmt::format("zstd compress: {}", ZSTD_getErrorName(n)));
  }
  out.resize(old_size + n);
  return {};
}

expected<std::optional<std::uint64_t>> zstd_declared_size(std::span<const std::byte> frame) {
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size == ZSTD_CONTENTSIZE_ERROR) {
    return make_unexpected(errc::compression_error, "not a zstd frame (bad magic or truncated header)");
  }
  if (size == ZSTD_CONTENTSIZE_UNKNOWN) {
    return std::optional<std::uint64_t>{};
  }
  return std::optional<std::uint64_t>{static_cast<std::uint64_t>(size)};
}

expected<void> zstd_decompress(std::span<const std::byte> input, std::uint64_t output_bytes_max,
                               std::vector<std::byte>& out) {
  out.clear();
  struct dctx_deleter {
    void operator()(ZSTD_DCtx* c) const noexcept { ZSTD_freeDCtx(c); }
  };
  // One context per thread, reused: decompression is on the compaction/verification path, not per message.
  thread_local std::unique_ptr<ZSTD_DCtx, dctx_deleter> dctx{ZSTD_createDCtx()};
  if (!dctx) {
    return make_unexpected(errc::compression_error, "zstd: cannot allocate a decompression context");
  }
  ZSTD_DCtx_reset(dctx.get(), ZSTD_reset_session_and_parameters);
  ZSTD_inBuffer in{input.data(), input.size(), 0};
  std::uint64_t chunk = 64 * 1024;
  for (;;) {
    const std::size_t old = out.size();
    const std::size_t room = std::min<std::uint64_t>(chunk, output_bytes_max - old);
    // At the cap, decompress into a one-byte probe: any output means the content is over the limit.
    const bool probing = room == 0;
    std::byte probe{};
    ZSTD_outBuffer o{&probe, 1, 0};
    if (!probing) {
      out.resize(old + room);
      o = ZSTD_outBuffer{out.data() + old, room, 0};
    }
    const std::size_t r = ZSTD_decompressStream(dctx.get(), &o, &in);
    if (!probing) {
      out.resize(old + o.pos);
    }
    if (ZSTD_isError(r)) {
      return make_unexpected(errc::compression_error, fmt::format("zstd decompress: {}", ZSTD_getErrorName(r)));
    }
    if (probing && o.pos > 0) {
      return make_unexpected(errc::batch_too_large,
                             fmt::format("decompressed records exceed {} bytes", output_bytes_max));
    }
    if (r == 0 && in.pos == in.size) {
      return {};  // every frame complete and flushed
    }
    if (in.pos == in.size && o.pos < o.size) {
      return make_unexpected(errc::compression_error, "zstd decompress: truncated frame");
    }
    chunk = std::min<std::uint64_t>(chunk * 2, 4 * 1024 * 1024);
  }
}

}  // namespace rill::storage
