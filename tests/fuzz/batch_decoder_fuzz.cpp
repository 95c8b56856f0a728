// libFuzzer target: every decoder that reads bytes from outside (the network, the disk).
//
// The input goes, unchanged, through the RecordBatch v2 validator (producer and stored limits), the deep record
// walk and header walk of whatever validates, the raw record reader, and the superblock, epoch-file and sealed
// index decoders. Nothing may crash, hang, read out of bounds or allocate beyond the limits.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "storage/epoch_file.h"
#include "storage/record_batch.h"
#include "storage/segment_index.h"
#include "storage/superblock.h"
#include "storage/superblock_format.h"

using namespace rill::storage;

namespace {
void walk(std::span<const std::byte> region) {
  record_reader rr(region);
  for (int i = 0; i < 100000; ++i) {
    auto r = rr.next();
    if (!r || !r->has_value()) {
      return;
    }
    header_reader hr((*r)->headers, (*r)->header_count);
    for (int h = 0; h < 100000; ++h) {
      auto hv = hr.next();
      if (!hv || !hv->has_value()) {
        break;
      }
    }
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  batch_limits producer;
  producer.dense_offsets = true;
  producer.uncompressed_bytes_max = 1 << 20;
  batch_limits stored;
  stored.batch_bytes_max = 1 << 24;
  stored.uncompressed_bytes_max = 1 << 20;
  std::vector<std::byte> scratch;
  for (const auto* limits : {&producer, &stored}) {
    std::uint32_t tail = 0;
    auto v = batch_view::validate(bytes, *limits, &tail);
    if (v) {
      (void)v->last_offset();
      if (validate_records_deep(*v, *limits, scratch)) {
        auto region = records_of(*v, limits->uncompressed_bytes_max, scratch);
        if (region) {
          walk(*region);
        }
      }
    }
  }
  (void)batch_view::size_from_prefix(bytes, 1 << 24);
  walk(bytes);
  if (size >= superblock_format::bytes) {
    (void)decode_superblock(bytes.data());
  }
  (void)epoch_history::decode(bytes);
  (void)segment_index::decode_sealed(bytes, 1 << 20, 4096);
  return 0;
}
