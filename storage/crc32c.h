#pragma once
// CRC-32C (Castagnoli; reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF), the checksum of
// Kafka RecordBatch v2 and of every rill metadata file.
//
// The SSE4.2 crc32 instruction is used when the CPU has it (checked once at run time); otherwise a portable
// slicing-by-8 table implementation gives the same answers. Long inputs run three interleaved chains and join them
// with crc32c_combine, which keeps the instruction's pipeline full (~3x one chain on these machines).
//
// All functions take and return finalized CRC values: crc32c_extend(crc32c(a), b) == crc32c(a || b), and
// crc32c_combine(crc32c(a), crc32c(b), b.size()) == crc32c(a || b).
#include <cstddef>
#include <cstdint>
#include <span>

namespace rill::storage {

[[nodiscard]] std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size) noexcept;

[[nodiscard]] inline std::uint32_t crc32c(const void* data, std::size_t size) noexcept {
  return crc32c_extend(0, data, size);
}
[[nodiscard]] inline std::uint32_t crc32c(std::span<const std::byte> bytes) noexcept {
  return crc32c_extend(0, bytes.data(), bytes.size());
}

// The CRC of a || b from crc(a), crc(b) and the length of b, in O(log len_b) without touching the bytes.
[[nodiscard]] std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b) noexcept;

// The two implementations, exposed so tests can check they agree.
[[nodiscard]] std::uint32_t crc32c_extend_portable(std::uint32_t crc, const void* data, std::size_t size) noexcept;
[[nodiscard]] std::uint32_t crc32c_extend_hardware(std::uint32_t crc, const void* data, std::size_t size) noexcept;
[[nodiscard]] bool crc32c_hardware_available() noexcept;

}  // namespace rill::storage
