// rill-dump: prints a partition directory (superblocks, leader epochs, segments, batches, index entries, and with
// --records the records) and, with --verify, checks every CRC, every record's framing and every index entry
// against the log. Exit status: 0 clean, 1 a problem was found (the message names the file and byte position),
// 2 bad usage or an unreadable path.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "base/endian.h"
#include "config/limits.h"
#include "storage/epoch_file.h"
#include "storage/record_batch.h"
#include "storage/segment.h"
#include "storage/segment_index.h"
#include "storage/segment_index_format.h"
#include "storage/superblock.h"
#include "storage/superblock_format.h"

namespace fs = std::filesystem;
using namespace rill;
using namespace rill::storage;

namespace {

struct options {
  std::string path;
  bool verify = false;
  bool records = false;
  bool index = true;
  bool quiet = false;
};

struct problem {
  std::string file;
  std::uint64_t position;
  std::string what;
};

class dumper {
 public:
  explicit dumper(options o) : o_(std::move(o)) {}

  int run() {
    std::error_code ec;
    if (fs::is_regular_file(o_.path, ec)) {
      dump_log(o_.path, std::nullopt);
    } else if (fs::is_directory(o_.path, ec)) {
      dump_dir();
    } else {
      fmt::print(stderr, "rill-dump: {}: not a partition directory or segment file\n", o_.path);
      return 2;
    }
    if (!problems_.empty()) {
      const auto& p = problems_.front();
      fmt::print(stderr, "rill-dump: FAILED: {} at byte {}: {}\n", p.file, p.position, p.what);
      if (problems_.size() > 1) {
        fmt::print(stderr, "rill-dump: {} more problem(s) listed above\n", problems_.size() - 1);
      }
      return 1;
    }
    if (o_.verify) {
      fmt::print("verify: OK ({} segments, {} batches, {} records)\n", segments_, batches_, records_);
    }
    return 0;
  }

 private:
  template <class... Args>
  void out(fmt::format_string<Args...> f, Args&&... args) {
    if (!o_.quiet) {
      fmt::print(f, std::forward<Args>(args)...);
    }
  }
  void fail(const std::string& file, std::uint64_t pos, std::string what) {
    fmt::print("  !! {} at byte {}: {}\n", file, pos, what);
    problems_.push_back(problem{file, pos, std::move(what)});
  }

  static std::optional<std::vector<std::byte>> read_file(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
      return std::nullopt;
    }
    std::vector<std::byte> bytes;
    std::byte buf[65536];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
      bytes.insert(bytes.end(), buf, buf + n);
    }
    std::fclose(f);
    return bytes;
  }

  void dump_dir() {
    out("partition {}\n", o_.path);
    for (const char* name : {superblock_format::name_a, superblock_format::name_b}) {
      const std::string p = (fs::path(o_.path) / name).string();
      auto bytes = read_file(p);
      if (!bytes) {
        out("  {}: missing\n", name);
        continue;
      }
      auto s = bytes->size() == superblock_format::bytes ? decode_superblock(bytes->data()) : std::nullopt;
      if (!s) {
        out("  {}: INVALID ({} bytes)\n", name, bytes->size());
        if (o_.verify) {
          // One damaged copy is survivable (recovery uses the other), but it is damage: report it.
          fail(p, 0, "superblock copy does not verify (magic, version or CRC)");
        }
        continue;
      }
      out("  {}: sequence {} committed {} log_start {} recovery_frontier {} truncate_from {}\n", name, s->sequence,
          s->committed.value(), s->log_start.value(), s->recovery_frontier.value(), s->truncate_from.value());
    }
    const std::string epochs = (fs::path(o_.path) / epoch_history::file_name).string();
    if (auto bytes = read_file(epochs)) {
      auto h = epoch_history::decode(*bytes);
      if (!h) {
        fail(epochs, 0, h.error().message());
      } else {
        for (const auto& e : h->entries()) {
          out("  leader epoch {} from offset {}\n", e.epoch.value(), e.start_offset.value());
        }
      }
    }
    std::map<std::int64_t, std::string> logs;
    for (const auto& entry : fs::directory_iterator(o_.path)) {
      auto parsed = parse_segment_file_name(entry.path().filename().string());
      if (parsed && parsed->second == "log") {
        logs[parsed->first.value()] = entry.path().string();
      }
    }
    std::optional<offset_t> expected;
    for (const auto& [base, path] : logs) {
      if (expected && offset_t(base) != *expected) {
        out("  -- offsets {} to {} are not in any segment\n", expected->value(), base - 1);
      }
      expected = dump_log(path, offset_t(base));
    }
  }

  // Returns the offset after the last valid batch.
  offset_t dump_log(const std::string& path, std::optional<offset_t> base) {
    ++segments_;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      fail(path, 0, std::string("cannot open: ") + std::strerror(errno));
      return base.value_or(offset_t(0));
    }
    const std::uint64_t size = static_cast<std::uint64_t>(::lseek(fd, 0, SEEK_END));
    out("segment {} ({} bytes)\n", path, size);
    std::vector<std::byte> window(4 * 1024 * 1024);
    std::vector<std::byte> scratch;
    batch_limits limits;
    limits.batch_bytes_max = 1ull << 32;
    std::uint64_t pos = 0;
    std::optional<offset_t> next = base;
    segment_index rebuilt(limits::index_interval_bytes);
    std::vector<std::pair<std::uint64_t, offset_t>> batch_starts;  // position -> base offset, for index checks
    while (pos < size) {
      std::byte prefix[batch_format::length_prefix_bytes];
      if (::pread(fd, prefix, sizeof prefix, static_cast<off_t>(pos)) != static_cast<ssize_t>(sizeof prefix)) {
        fail(path, pos, fmt::format("{} trailing bytes, shorter than a batch header", size - pos));
        break;
      }
      auto bsize = batch_view::size_from_prefix(prefix, limits.batch_bytes_max);
      if (!bsize) {
        if (all_zero_from(fd, pos, size)) {
          out("  {} bytes of zeros from byte {} (preallocation)\n", size - pos, pos);
        } else {
          fail(path, pos, bsize.error().message());
        }
        break;
      }
      if (pos + *bsize > size) {
        fail(path, pos, fmt::format("batch of {} bytes runs past the end of the file ({} bytes)", *bsize, size));
        break;
      }
      if (window.size() < *bsize) {
        window.resize(*bsize);
      }
      if (::pread(fd, window.data(), *bsize, static_cast<off_t>(pos)) != static_cast<ssize_t>(*bsize)) {
        fail(path, pos, "short read");
        break;
      }
      const std::span<const std::byte> bytes(window.data(), *bsize);
      auto v = batch_view::validate(bytes, limits);
      batch_view view = v ? *v : batch_view::trusted(bytes);
      out("  batch @{} offsets {}..{} records {} size {} codec {} epoch {} ts {}..{}{}{}\n", pos,
          view.base_offset().value(), view.last_offset().value(), view.records_count(), *bsize,
          view.codec() == compression::zstd ? "zstd" : (view.codec_bits() == 0 ? "none" : "other"),
          view.leader_epoch().value(), view.base_timestamp().value(), view.max_timestamp().value(),
          view.log_append_time() ? " log-append-time" : "",
          view.producer_id() >= 0
              ? fmt::format(" producer {}/{} seq {}", view.producer_id(), view.producer_epoch(), view.base_sequence())
              : std::string());
      if (!v) {
        fail(path, pos, v.error().message());
        break;
      }
      if (next && view.base_offset() != *next) {
        fail(path, pos,
             fmt::format("batch starts at offset {}, expected {}", view.base_offset().value(), next->value()));
      }
      if (o_.verify || o_.records) {
        auto deep = validate_records_deep(view, limits, scratch);
        if (!deep) {
          fail(path, pos, deep.error().message());
        } else if (o_.records) {
          print_records(view, scratch);
        }
      }
      const offset_t segment_base = base.value_or(view.base_offset());
      rebuilt.on_batch(static_cast<std::uint32_t>(view.base_offset() - segment_base), static_cast<std::uint32_t>(pos),
                       static_cast<std::uint32_t>(*bsize), view.max_timestamp());
      batch_starts.emplace_back(pos, view.base_offset());
      ++batches_;
      records_ += static_cast<std::uint64_t>(std::max(view.records_count(), 0));
      next = view.next_offset();
      pos += *bsize;
    }
    ::close(fd);
    check_index(path, base, size, rebuilt, batch_starts);
    return next.value_or(offset_t(0));
  }

  bool all_zero_from(int fd, std::uint64_t pos, std::uint64_t size) {
    std::vector<std::byte> buf(1 << 20);
    while (pos < size) {
      const auto n = ::pread(fd, buf.data(), std::min<std::uint64_t>(buf.size(), size - pos), static_cast<off_t>(pos));
      if (n <= 0) {
        return false;
      }
      if (!std::all_of(buf.begin(), buf.begin() + n, [](std::byte b) { return b == std::byte{0}; })) {
        return false;
      }
      pos += static_cast<std::uint64_t>(n);
    }
    return true;
  }

  void print_records(const batch_view& view, const std::vector<std::byte>& scratch) {
    std::span<const std::byte> region =
        view.codec() == compression::none ? view.records_region() : std::span<const std::byte>(scratch);
    record_reader rr(region);
    for (;;) {
      auto r = rr.next();
      if (!r || !r->has_value()) {
        break;
      }
      const auto& rec = **r;
      auto show = [](const std::optional<std::span<const std::byte>>& b) {
        if (!b) {
          return std::string("null");
        }
        std::string s(reinterpret_cast<const char*>(b->data()), std::min<std::size_t>(b->size(), 64));
        for (auto& c : s) {
          if (c < 32 || c > 126) {
            c = '.';
          }
        }
        return fmt::format("\"{}\"{}", s, b->size() > 64 ? fmt::format("...({} bytes)", b->size()) : "");
      };
      out("    offset {} key {} value {} headers {}\n", view.base_offset().value() + rec.offset_delta, show(rec.key),
          show(rec.value), rec.header_count);
    }
  }

  void check_index(const std::string& log_path, std::optional<offset_t> base, std::uint64_t log_size,
                   const segment_index& rebuilt, const std::vector<std::pair<std::uint64_t, offset_t>>& starts) {
    if (!base) {
      return;
    }
    const std::string path = log_path.substr(0, log_path.size() - 4) + ".index";
    auto bytes = read_file(path);
    if (!bytes) {
      out("  index {}: missing (recovery rebuilds it)\n", path);
      return;
    }
    const bool sealed = bytes->size() >= segment_index_format::entry_bytes &&
                        load_be<std::uint32_t>(bytes->data() + bytes->size() - segment_index_format::entry_bytes) ==
                            segment_index_format::seal_marker;
    std::vector<index_entry> entries;
    if (sealed) {
      auto idx = segment_index::decode_sealed(*bytes, log_size, limits::index_interval_bytes);
      if (!idx) {
        fail(path, 0, idx.error().message());
        return;
      }
      entries = idx->entries();
    } else {
      if (bytes->size() % segment_index_format::entry_bytes != 0) {
        fail(path, bytes->size() / segment_index_format::entry_bytes * segment_index_format::entry_bytes,
             "partial index entry (active segment index, rebuilt at recovery)");
      }
      for (std::size_t at = 0; at + segment_index_format::entry_bytes <= bytes->size();
           at += segment_index_format::entry_bytes) {
        entries.push_back(index_entry{load_be<std::uint32_t>(bytes->data() + at),
                                      load_be<std::uint32_t>(bytes->data() + at + 4),
                                      timestamp_ms_t(load_be<std::int64_t>(bytes->data() + at + 8))});
      }
    }
    out("  index {}: {} entries{}\n", path, entries.size(), sealed ? ", sealed" : " (active)");
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const auto& e = entries[i];
      if (o_.index) {
        out("    entry {}: relative offset {} position {} max timestamp {}\n", i, e.relative_offset, e.position,
            e.max_timestamp.value());
      }
      // Every entry must point at a batch start whose offset matches.
      auto it = std::lower_bound(starts.begin(), starts.end(), std::uint64_t{e.position},
                                 [](const auto& s, std::uint64_t p) { return s.first < p; });
      if (it == starts.end() || it->first != e.position) {
        fail(path, i * segment_index_format::entry_bytes,
             fmt::format("entry {} points at byte {}, which is not a batch start in the log", i, e.position));
      } else if (it->second != *base + e.relative_offset) {
        fail(path, i * segment_index_format::entry_bytes,
             fmt::format("entry {} says offset {}, the batch there starts at {}", i,
                         (*base + e.relative_offset).value(), it->second.value()));
      }
    }
    if (sealed && entries != rebuilt.entries()) {
      fail(path, 0, fmt::format("sealed index has {} entries, the log gives {}", entries.size(), rebuilt.size()));
    }
  }

  options o_;
  std::vector<problem> problems_;
  std::uint64_t segments_ = 0;
  std::uint64_t batches_ = 0;
  std::uint64_t records_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rill-dump: print and verify a rill partition directory or segment file"};
  options o;
  app.add_option("path", o.path, "partition directory (or one .log file)")->required();
  app.add_flag("--verify", o.verify, "check every CRC, record and index entry; exit 1 at the first problem");
  app.add_flag("--records", o.records, "print every record (key, value, headers)");
  bool no_index = false;
  app.add_flag("--no-index", no_index, "do not print index entries");
  app.add_flag("-q,--quiet", o.quiet, "print only problems and the verify summary");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  o.index = !no_index;
  return dumper(std::move(o)).run();
}
