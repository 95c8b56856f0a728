#pragma once
// Kafka's key partitioner: MurmurHash2 (32-bit, seed 0x9747b28c) as Kafka's Java client computes it, so keyed data
// lands where a Kafka client would put it: partition = (murmur2(key) & 0x7fffffff) % partitions.
#include <cstddef>
#include <cstdint>
#include <span>

namespace rill::net {

[[nodiscard]] std::int32_t murmur2(std::span<const std::byte> key) noexcept;
[[nodiscard]] std::uint32_t partition_for_key(std::span<const std::byte> key, std::uint32_t partitions) noexcept;

}  // namespace rill::net
