#pragma once
// Batches as a hostile (or transactional Kafka) client could send them: valid bytes with header fields changed
// and the CRC recomputed, so that only the broker's field checks can refuse them.
#include <cstdint>
#include <vector>

#include "base/endian.h"
#include "storage/crc32c.h"
#include "storage/record_batch_format.h"

namespace rill::storage::testing {

// `batch` with attribute `bits` or-ed in and its CRC recomputed.
inline std::vector<std::byte> with_attributes(std::vector<std::byte> batch, std::uint16_t bits) {
  namespace bf = batch_format;
  const auto attributes = static_cast<std::uint16_t>(load_be<std::uint16_t>(batch.data() + bf::attributes_at) | bits);
  store_be<std::uint16_t>(batch.data() + bf::attributes_at, attributes);
  store_be<std::uint32_t>(batch.data() + bf::crc_at,
                          crc32c(batch.data() + bf::attributes_at, batch.size() - bf::attributes_at));
  return batch;
}

// `batch` with its producer id, epoch and base sequence overwritten and its CRC left as it was: a header corrupted
// on the way (or forged), which only the CRC can tell.
inline std::vector<std::byte> with_forged_producer(std::vector<std::byte> batch, std::int64_t id, std::int16_t epoch,
                                                   std::int32_t sequence) {
  namespace bf = batch_format;
  store_be<std::int64_t>(batch.data() + bf::producer_id_at, id);
  store_be<std::int16_t>(batch.data() + bf::producer_epoch_at, epoch);
  store_be<std::int32_t>(batch.data() + bf::base_sequence_at, sequence);
  return batch;
}

}  // namespace rill::storage::testing
