// Writes the seed corpus for batch_decoder_fuzz: valid batches of every shape the builder makes (empty, keys,
// tombstones, headers, producer ids, zstd), a superblock, an epoch file and a sealed index.
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "storage/epoch_file.h"
#include "storage/record_batch_builder.h"
#include "storage/segment_index.h"
#include "storage/superblock.h"
#include "storage/superblock_format.h"
#include "tests/fuzz/seed_writer.h"

using namespace rill;
using namespace rill::storage;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus DIR\n");
    return 2;
  }
  fuzz::seed_writer seeds(argv[1], "seed");
  for (auto codec : {compression::none, compression::zstd}) {
    for (int records : {0, 1, 3, 17}) {
      batch_builder b(codec);
      b.base_offset(offset_t(records * 10)).producer(records, 1, 5).base_timestamp(timestamp_ms_t(1000));
      for (int i = 0; i < records; ++i) {
        const std::string hk = "h";
        // fmt, not "v" + std::to_string(i): GCC 12 -O3 reports a -Wrestrict false positive in that operator+.
        const std::string hv = fmt::format("v{}", i);
        header_kv hdr[] = {{as_bytes(hk), as_bytes(hv)}};
        const std::string key = fmt::format("k{}", i);
        if (i % 3 == 2) {
          b.add(as_bytes(key), std::nullopt, hdr, i);  // tombstone
        } else {
          b.add(as_bytes(key), as_bytes(std::string(static_cast<std::size_t>(i * 7), 'x')), hdr, i);
        }
      }
      seeds.put(*b.build());
    }
  }
  std::vector<std::byte> sb(superblock_format::bytes);
  encode_superblock(superblock_state{3, offset_t(100), offset_t(0), offset_t(50), offset_t(-1)}, sb.data());
  seeds.put(sb);
  epoch_history h;
  h.assign(epoch_t(1), offset_t(0));
  h.assign(epoch_t(4), offset_t(100));
  seeds.put(h.encode());
  segment_index idx(4096);
  idx.on_batch(0, 0, 5000, timestamp_ms_t(10));
  idx.on_batch(10, 5000, 5000, timestamp_ms_t(20));
  seeds.put(idx.encode_sealed());
  std::printf("wrote %d seeds to %s\n", seeds.written(), seeds.dir().c_str());
  return 0;
}
