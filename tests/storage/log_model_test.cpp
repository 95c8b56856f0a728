// Model-based randomized test: a partition_log on the simulated disk is driven by a seeded random sequence of
// operations and compared after every one of them with a plain in-memory model of what the log must contain.
//
// Operations (chosen by rill::prng from the seed):
//   - appends of 1-3 producer batches (random record counts, value sizes, sometimes zstd, sometimes a batch larger
//     than a segment), alone or several in flight together, with reads started in between; once in a while a
//     request with a damaged batch, which must be refused whole;
//   - reads by offset, timestamp, first and last with random max_bytes / max_records / verify_crc;
//   - enforce_retention with a small retention_bytes (the new log start is predicted from the model), also racing
//     a read that is inside a segment retention removes;
//   - flush, clean close + reopen, and crashes (stop the disk at a random point of a group of appends, right away
//     or a few mutating operations later so that a write can land without its sync; drain, close, power loss,
//     recover);
//   - on some seeds, injected write errors around some operations.
// Invariants checked:
//   - log_start <= committed <= log_end, committed == synced_end (auto commit, sync_before_ack); log_start is a
//     segment base; the segment files on disk are exactly the live segments once background deletion is done;
//   - acknowledged appends get dense offsets, in request order, and monotonic log-append timestamps;
//   - reads return whole batches from the batch containing the start, at least one when one is visible, never past
//     the high-watermark, within max_bytes / max_records (except the first batch), not fewer than the limits allow
//     (up to the read window), with exact offsets, values and timestamps;
//   - no acknowledged record is ever lost (unless below log_start); after a crash, what appears past the
//     acknowledged end is whole, dense, unacknowledged batches exactly as submitted (each at most once); a refused
//     request never appears; a failed append leaves no trace while no crash happens;
//   - an offset never changes its value for a consumer, across reopens and crashes; committed never goes back.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>

#include "base/random.h"
#include "storage/errc.h"
#include "storage/segment.h"
#include "tests/storage/log_fixture.h"

using namespace rill;
using namespace rill::storage;
using namespace rill::storage::testing;

namespace {

using i64 = std::int64_t;

constexpr std::uint64_t kib = 1024;
constexpr std::uint64_t mib = 1024 * 1024;

// The value of record `i` of the batch tagged `tag`, exactly as make_batch() builds it.
std::string value_for(const std::string& tag, int i, std::size_t value_bytes) {
  std::string v = tag + "-" + std::to_string(i);
  if (v.size() < value_bytes) {
    v.resize(value_bytes, '.');
  }
  return v;
}

// The tag of the batch a value belongs to ("b12-3...." -> "b12").
std::string tag_of(const std::string& value) {
  const std::string head = value.substr(0, value.find('.'));
  const auto dash = head.rfind('-');
  return dash == std::string::npos ? head : head.substr(0, dash);
}

struct model_batch {
  i64 base = 0;
  std::string tag;
  int records = 0;
  std::size_t value_bytes = 0;
  std::uint64_t size = 0;
  i64 ts = 0;
  [[nodiscard]] i64 next() const { return base + records; }
};

struct submission {
  enum class state { pending, acked, failed, recovered, refused };
  int records = 0;
  std::size_t value_bytes = 0;
  std::uint64_t size = 0;
  state st = state::pending;
};

// What a read saw at its start (log_cursor::next takes log_start, committed and log_end before its first I/O).
struct snapshot {
  i64 log_start = 0;
  i64 committed = 0;
  i64 log_end = 0;
};

struct stored_batch {
  i64 base = 0;
  int records = 0;
  std::uint64_t size = 0;
  i64 ts = 0;
  std::vector<std::string> values;
  [[nodiscard]] i64 next() const { return base + records; }
};

struct pending_append {
  std::vector<std::string> tags;
  bool damaged = false;
  std::optional<expected<append_result>> result;
};

struct pending_read {
  read_request req;
  snapshot snap;
  std::optional<expected<read_result>> result;
};

struct options_for_seed {
  std::uint64_t ops = 500;
  bool write_faults = false;
  std::uint64_t read_window = 1 * mib;
  std::uint64_t preallocate = 0;
};

class log_model {
 public:
  log_model(std::uint64_t seed, options_for_seed o)
      : seed_(seed), opts_(o), rng_(seed * 0x9e3779b97f4a7c15ULL + 0x5eed), f_(seed) {
    f_.options.config.segment_bytes = 1 * mib;
    f_.options.config.retention_bytes = 5 * mib / 2;
    f_.options.config.delete_step_bytes = 1 * mib;
    f_.options.config.max_message_bytes = 3 * mib / 2;
    f_.options.config.read_window_bytes = o.read_window;
    f_.options.config.preallocate_bytes = o.preallocate;
    f_.options.config.superblock_interval_records = 200;
  }

  void run() {
    f_.open();
    verify_log(false, false);
    for (op_ = 0; op_ < opts_.ops; ++op_) {
      f_.clk.advance(std::chrono::milliseconds(rng_.below(1500)));
      const std::uint64_t u = rng_.below(1000);
      if (u < 330) {
        op_group(false);
      } else if (u < 620) {
        op_read();
      } else if (u < 680) {
        op_retention();
      } else if (u < 710) {
        op_read_racing_retention();
      } else if (u < 760) {
        op_reopen();
      } else if (u < 820) {
        op_group(true);
      } else if (u < 840) {
        op_flush();
      } else if (u < 860) {
        op_damaged_append();
      } else {
        trace("clock only");
      }
      after_op();
      if ((op_ + 1) % 25 == 0) {
        verify_log(false, false);
      }
    }
    verify_log(false, false);
    f_.close();
    BOOST_TEST_MESSAGE("seed " << seed_ << ": " << model_.size() << " batches, end " << end() << ", log start "
                               << log_start_ << ", " << crashes_ << " crashes, " << reopens_ << " reopens, "
                               << failed_appends_ << " failed appends, " << fences_ << " fences, " << reads_
                               << " reads, " << retained_segments_ << " segments removed by retention, "
                               << recovered_batches_ << " unacknowledged batches recovered");
  }

 private:
  // ---- reporting ----------------------------------------------------------------------------------------------
  void trace(std::string what) {
    trace_.push_back("op " + std::to_string(op_) + ": " + std::move(what));
    if (trace_.size() > 40) {
      trace_.pop_front();
    }
  }
  [[noreturn]] void fail(const char* cond, const std::string& what) {
    std::ostringstream os;
    os << "seed " << seed_ << ", op " << op_ << ": " << cond << ": " << what << "\nlast operations:\n";
    for (const auto& t : trace_) {
      os << "  " << t << "\n";
    }
    BOOST_FAIL(os.str());
    std::abort();  // not reached
  }
#define MODEL_CHECK(cond, msg) \
  do {                         \
    if (!(cond)) {             \
      std::ostringstream os_;  \
      os_ << msg;              \
      fail(#cond, os_.str());  \
    }                          \
  } while (0)

  // ---- model helpers ------------------------------------------------------------------------------------------
  [[nodiscard]] i64 end() const {
    return model_.empty() ? 0 : model_.back().next();
  }
  // Index of the model batch containing offset o (o < end()).
  [[nodiscard]] std::size_t find(i64 o) const {
    auto it = std::upper_bound(model_.begin(), model_.end(), o, [](i64 x, const model_batch& b) { return x < b.base; });
    return static_cast<std::size_t>(it - model_.begin()) - 1;
  }
  [[nodiscard]] bool is_boundary(i64 o) const {
    return o == end() || (o < end() && model_[find(o)].base == o);
  }
  [[nodiscard]] snapshot snap() const {
    return snapshot{f_.log->log_start().value(), f_.log->committed().value(), f_.log->log_end().value()};
  }

  void note_seen(i64 offset, const std::string& value) {
    auto [it, inserted] = seen_.emplace(offset, value);
    MODEL_CHECK(inserted || it->second == value, "offset " << offset << " was read as '" << it->second.substr(0, 24)
                                                           << "' and now as '" << value.substr(0, 24) << "'");
  }

  std::vector<std::byte> new_batch(std::string& tag) {
    tag = "b" + std::to_string(next_tag_++);
    int records = 1;
    std::size_t vb = 16;
    const std::uint64_t u = rng_.below(1000);
    if (u < 200) {
      records = static_cast<int>(rng_.between(1, 20));
      vb = rng_.between(1, 64);
    } else if (u < 780) {
      records = static_cast<int>(rng_.between(1, 16));
      vb = rng_.between(64, 1500);
    } else if (u < 950) {
      records = static_cast<int>(rng_.between(1, 8));
      vb = rng_.between(1500, 9000);
    } else if (u < 995) {
      records = static_cast<int>(rng_.between(1, 4));
      vb = rng_.between(20'000, 200'000);
    } else {
      records = 1;  // larger than a segment: gets a segment of its own
      vb = rng_.between(1'050'000, 1'300'000);
    }
    const auto codec = rng_.below(10) == 0 ? compression::zstd : compression::none;
    auto bytes = make_batch(tag, records, vb, codec);
    subs_[tag] = submission{records, vb, bytes.size(), submission::state::pending};
    return bytes;
  }

  // A produce request of 1-3 batches.
  std::unique_ptr<pending_append> new_request(std::vector<std::byte>& out) {
    auto p = std::make_unique<pending_append>();
    const int n = static_cast<int>(rng_.between(1, 3));
    for (int i = 0; i < n; ++i) {
      std::string tag;
      auto b = new_batch(tag);
      out.insert(out.end(), b.begin(), b.end());
      p->tags.push_back(tag);
    }
    return p;
  }

  read_request random_read(const snapshot& s, bool allow_timestamp) {
    read_request r;
    const std::uint64_t k = rng_.below(100);
    if (k < 55 || (!allow_timestamp && k >= 80)) {
      r.start = read_start::offset;
      const std::uint64_t w = rng_.below(100);
      if (w < 65 || model_.empty()) {
        r.offset = offset_t(static_cast<i64>(
            rng_.between(static_cast<std::uint64_t>(s.log_start), static_cast<std::uint64_t>(s.committed))));
      } else if (w < 75 && s.log_start > 0) {
        const i64 lo = std::max<i64>(0, s.log_start - 50);
        r.offset = offset_t(static_cast<i64>(
            rng_.between(static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(s.log_start - 1))));
      } else if (w < 85) {
        r.offset = offset_t(s.log_end + static_cast<i64>(rng_.between(0, 3)));
      } else {
        // The base or the last record of a random live batch.
        const std::size_t lo = s.log_start < end() ? find(s.log_start) : model_.size() - 1;
        const auto& b = model_[rng_.between(lo, model_.size() - 1)];
        r.offset = offset_t(rng_.below(2) == 0 ? b.base : b.next() - 1);
      }
    } else if (k < 67) {
      r.start = read_start::first;
    } else if (k < 80) {
      r.start = read_start::last;
    } else {
      r.start = read_start::timestamp;
      const std::uint64_t w = rng_.below(10);
      if (model_.empty() || s.log_start >= end() || w == 0) {
        r.timestamp = timestamp_ms_t(f_.clk.wall_ms().value() - static_cast<i64>(rng_.below(100'000)));
      } else if (w == 1) {
        r.timestamp = timestamp_ms_t(model_.back().ts + 1);
      } else {
        const auto& b = model_[rng_.between(find(s.log_start), model_.size() - 1)];
        r.timestamp = timestamp_ms_t(b.ts + static_cast<i64>(rng_.below(3)) - 1);
      }
    }
    const std::uint64_t m = rng_.below(100);
    r.max_records = m < 60 ? UINT32_MAX : static_cast<std::uint32_t>(rng_.between(1, 40));
    const std::uint64_t b = rng_.below(100);
    if (b < 30) {
      r.max_bytes = 1 * mib;
    } else if (b < 50) {
      r.max_bytes = rng_.between(1, 200);
    } else if (b < 80) {
      r.max_bytes = rng_.between(200, 100 * kib);
    } else {
      r.max_bytes = rng_.between(100 * kib, 3 * mib);
    }
    r.verify_crc = rng_.below(5) != 0;
    return r;
  }

  static std::string describe(const read_request& r) {
    std::ostringstream os;
    switch (r.start) {
      case read_start::offset:
        os << "read offset " << r.offset.value();
        break;
      case read_start::first:
        os << "read first";
        break;
      case read_start::last:
        os << "read last";
        break;
      case read_start::timestamp:
        os << "read timestamp " << r.timestamp.value();
        break;
    }
    os << " max_bytes " << r.max_bytes << " max_records " << r.max_records;
    return os.str();
  }

  // ---- checks -------------------------------------------------------------------------------------------------
  void check_positions(bool quiescent) {
    const auto& log = *f_.log;
    const i64 ls = log.log_start().value();
    const i64 c = log.committed().value();
    const i64 le = log.log_end().value();
    MODEL_CHECK(ls <= c && c <= le, "log_start " << ls << " committed " << c << " log_end " << le);
    MODEL_CHECK(c == log.synced_end().value(), "committed " << c << " synced_end " << log.synced_end().value());
    MODEL_CHECK(c >= committed_max_, "committed went back from " << committed_max_ << " to " << c);
    committed_max_ = std::max(committed_max_, c);
    if (quiescent) {
      MODEL_CHECK(le == end(), "log_end " << le << ", model end " << end());
      MODEL_CHECK(c == le, "idle, committed " << c << " log_end " << le);
      MODEL_CHECK(ls == log_start_, "log_start " << ls << ", model " << log_start_);
      const auto bases = log.segment_bases();
      MODEL_CHECK(!bases.empty() && bases.front().value() == ls, "log_start "
                                                                     << ls << " is not the first segment base "
                                                                     << (bases.empty() ? -1 : bases.front().value()));
    }
  }

  // Compares one stored batch with model batch `m`; records what a consumer saw.
  void check_batch(const stored_batch& b, const model_batch& m, const char* where) {
    MODEL_CHECK(b.base == m.base, where << ": batch at " << b.base << ", model batch at " << m.base);
    MODEL_CHECK(b.records == m.records && b.values.size() == static_cast<std::size_t>(m.records),
                where << ": batch " << b.base << " has " << b.records << " records, model " << m.records);
    MODEL_CHECK(b.size == m.size, where << ": batch " << b.base << " is " << b.size << " bytes, model " << m.size);
    MODEL_CHECK(b.ts == m.ts, where << ": batch " << b.base << " max_timestamp " << b.ts << ", model " << m.ts);
    for (int i = 0; i < m.records; ++i) {
      const auto& v = b.values[static_cast<std::size_t>(i)];
      MODEL_CHECK(v == value_for(m.tag, i, m.value_bytes), where << ": offset " << b.base + i << " has '"
                                                                 << v.substr(0, 24) << "', expected " << m.tag << "-"
                                                                 << i);
      note_seen(b.base + i, v);
    }
  }

  std::vector<stored_batch> parse(const read_result& r) {
    std::vector<stored_batch> out;
    for (const auto& v : split_batches(r.bytes.span())) {
      stored_batch s;
      s.base = v.base_offset().value();
      s.records = v.records_count();
      s.size = v.size();
      s.ts = v.max_timestamp().value();
      s.values = values_of(v);
      MODEL_CHECK(v.last_offset_delta() + 1 == s.records, "batch " << s.base << " is not dense");
      out.push_back(std::move(s));
    }
    return out;
  }

  // Checks one read against the model, given what the log looked like when it started.
  void check_read(const read_request& q, const snapshot& s, const expected<read_result>& r, bool io_may_fail) {
    ++reads_;
    const std::string what = describe(q);
    const i64 bound = s.committed;
    i64 start = 0;
    switch (q.start) {
      case read_start::offset:
        start = q.offset.value();
        break;
      case read_start::first:
        start = s.log_start;
        break;
      case read_start::last:
        start = bound > s.log_start ? bound - 1 : s.log_start;
        break;
      case read_start::timestamp: {
        start = bound;
        for (std::size_t i = s.log_start < end() ? find(s.log_start) : model_.size(); i < model_.size(); ++i) {
          if (model_[i].ts >= q.timestamp.value()) {
            start = std::max(model_[i].base, s.log_start);
            break;
          }
        }
        break;
      }
    }
    if (!r && io_may_fail && r.error().code() == errc::io_error) {
      return;
    }
    if (start < s.log_start || start > s.log_end) {
      MODEL_CHECK(!r.has_value(), what << ": expected offset_out_of_range (log " << s.log_start << ".." << s.log_end
                                       << "), got " << (r ? r->batches : 0) << " batches");
      MODEL_CHECK(r.error().code() == errc::offset_out_of_range, what << ": " << r.error().message());
      return;
    }
    MODEL_CHECK(r.has_value(), what << ": " << r.error().message());
    MODEL_CHECK(r->high_watermark.value() == s.committed,
                what << ": high_watermark " << r->high_watermark.value() << ", committed was " << s.committed);
    MODEL_CHECK(r->log_start.value() == s.log_start, what << ": log_start " << r->log_start.value());
    const auto got = parse(*r);
    MODEL_CHECK(got.size() == r->batches, what << ": " << got.size() << " batches, result says " << r->batches);
    MODEL_CHECK(r->bytes.size() == std::accumulate(got.begin(), got.end(), std::uint64_t{0},
                                                   [](std::uint64_t a, const stored_batch& b) { return a + b.size; }),
                what << ": bytes do not add up");
    if (start >= bound) {
      MODEL_CHECK(got.empty(), what << ": " << got.size() << " batches past the high-watermark " << bound);
      MODEL_CHECK(r->next_offset.value() == start,
                  what << ": next_offset " << r->next_offset.value() << ", expected " << start);
      return;
    }
    MODEL_CHECK(!got.empty(), what << ": empty, but batch containing " << start << " is visible (hwm " << bound << ")");
    const std::size_t i0 = find(start);
    MODEL_CHECK(r->first_offset.value() == model_[i0].base, what << ": first_offset " << r->first_offset.value()
                                                                 << ", batch containing " << start << " is at "
                                                                 << model_[i0].base);
    std::uint64_t used = 0;
    std::uint64_t recs = 0;
    for (std::size_t k = 0; k < got.size(); ++k) {
      MODEL_CHECK(i0 + k < model_.size(), what << ": batch beyond the model end");
      const auto& m = model_[i0 + k];
      MODEL_CHECK(m.base < bound, what << ": batch " << m.base << " at or past the high-watermark " << bound);
      if (k > 0) {
        MODEL_CHECK(used < q.max_bytes && recs < q.max_records && used + m.size <= q.max_bytes &&
                        recs + static_cast<std::uint64_t>(m.records) <= q.max_records,
                    what << ": batch " << k << " exceeds the limits (" << used << " + " << m.size << " bytes, " << recs
                         << " + " << m.records << " records)");
      }
      check_batch(got[k], m, what.c_str());
      used += m.size;
      recs += static_cast<std::uint64_t>(m.records);
    }
    MODEL_CHECK(r->records == recs, what << ": records " << r->records << ", batches hold " << recs);
    const std::size_t j = i0 + got.size();
    const i64 expect_next = model_[j - 1].next();
    MODEL_CHECK(r->next_offset.value() == expect_next,
                what << ": next_offset " << r->next_offset.value() << ", expected " << expect_next);
    // Not fewer batches than the limits allow, except where the read window ends: the first positional read
    // starts at most one index interval before the first batch and covers read_window_bytes.
    if (j < model_.size() && model_[j].base < bound) {
      const auto& n = model_[j];
      const bool allowed = used < q.max_bytes && recs < q.max_records && used + n.size <= q.max_bytes &&
                           recs + static_cast<std::uint64_t>(n.records) <= q.max_records;
      if (allowed) {
        MODEL_CHECK(used + n.size + limits::index_interval_bytes > opts_.read_window,
                    what << ": stopped after " << got.size() << " batches (" << used << " bytes) though batch "
                         << n.base << " (" << n.size << " bytes) fits the limits and the read window");
      }
    }
  }

  // Every batch from log_start to the visible end, read in 1 MiB steps.
  std::vector<stored_batch> scan_all() {
    std::vector<stored_batch> out;
    i64 at = f_.log->log_start().value();
    for (;;) {
      auto r = f_.read_at(at, 1 * mib);
      MODEL_CHECK(r.has_value(), "scan at " << at << ": " << r.error().message());
      if (r->batches == 0) {
        break;
      }
      auto got = parse(*r);
      MODEL_CHECK(got.front().base <= at && got.front().next() > at,
                  "scan at " << at << " returned a batch at " << got.front().base);
      MODEL_CHECK(r->first_offset.value() == got.front().base,
                  "scan at " << at << ": first_offset " << r->first_offset.value());
      at = got.back().next();
      MODEL_CHECK(r->next_offset.value() == at, "scan: next_offset " << r->next_offset.value() << ", expected " << at);
      for (auto& b : got) {
        out.push_back(std::move(b));
      }
    }
    return out;
  }

  // The whole log against the model. After a crash, batches past the acknowledged end may have survived: they
  // must be whole unacknowledged submissions, dense, each at most once; they join the model (they are visible now).
  // `start_may_move`: a retention was in flight at the crash, so its new log start may or may not have persisted.
  void verify_log(bool after_crash, bool start_may_move) {
    const i64 ls = f_.log->log_start().value();
    if (start_may_move) {
      MODEL_CHECK(ls >= log_start_ && is_boundary(ls),
                  "log_start " << ls << " after an interrupted retention, was " << log_start_);
      log_start_ = ls;
    }
    MODEL_CHECK(ls == log_start_, "log_start " << ls << ", model " << log_start_);
    const auto stored = scan_all();
    const i64 acked_end = end();
    i64 at = ls;
    for (const auto& b : stored) {
      MODEL_CHECK(b.base == at, "the log continues at " << b.base << " after " << at << " (offsets not dense)");
      if (b.base < acked_end) {
        const std::size_t i = find(b.base);
        check_batch(b, model_[i], "scan");
      } else {
        MODEL_CHECK(after_crash, "batch " << b.base << " past the model end " << acked_end << " without a crash");
        MODEL_CHECK(!b.values.empty(), "empty batch at " << b.base);
        const std::string tag = tag_of(b.values.front());
        auto it = subs_.find(tag);
        MODEL_CHECK(it != subs_.end(), "batch " << b.base << " with unknown tag " << tag);
        auto& s = it->second;
        MODEL_CHECK(s.st == submission::state::failed,
                    "batch " << b.base << " (" << tag << ") survived the crash, but it was "
                             << (s.st == submission::state::refused     ? "refused"
                                 : s.st == submission::state::acked     ? "acknowledged at another offset"
                                 : s.st == submission::state::recovered ? "already recovered"
                                                                        : "pending"));
        MODEL_CHECK(model_.empty() || b.ts >= model_.back().ts,
                    "batch " << b.base << " timestamp " << b.ts << " goes back from " << model_.back().ts);
        model_batch m{b.base, tag, s.records, s.value_bytes, s.size, b.ts};
        check_batch(b, m, "recovered tail");
        s.st = submission::state::recovered;
        model_.push_back(m);
        ++recovered_batches_;
      }
      at = b.next();
    }
    MODEL_CHECK(at >= acked_end, "acknowledged records from " << at << " to " << acked_end << " are lost");
    check_positions(true);
    // Segment files on disk are exactly the live segments once the deleter is done.
    io::run_until(f_.disk, [] { return false; });
    std::set<i64> files;
    for (const auto& name : f_.disk.list(f_.dir)) {
      if (auto p = parse_segment_file_name(name); p && p->second == "log") {
        files.insert(p->first.value());
      }
    }
    std::set<i64> live;
    for (auto b : f_.log->segment_bases()) {
      live.insert(b.value());
    }
    MODEL_CHECK(files == live, files.size() << " segment files on disk, " << live.size() << " live segments");
  }

  void check_reports(bool faults) {
    for (const auto& c : f_.reporter.corruptions) {
      const bool ok = c.action.find("using the other") != std::string::npos ||
                      (faults && c.action.find("rebuilt") != std::string::npos);
      MODEL_CHECK(ok, "unexpected report " << c.file << " @" << c.position << ": " << c.problem << " -> " << c.action);
    }
    f_.reporter.corruptions.clear();
  }

  // ---- operations ---------------------------------------------------------------------------------------------
  void set_faults(bool on) {
    if (on) {
      faults_since_open_ = true;
    }
    f_.disk.faults().write_error_ppm = on ? 100'000 : 0;
  }
  bool maybe_faults() {
    const bool on = opts_.write_faults && rng_.below(4) == 0;
    set_faults(on);
    return on;
  }

  void open_log(bool after_crash, bool start_may_move) {
    set_faults(false);
    f_.reporter.corruptions.clear();
    f_.open();
    check_reports(faults_since_open_);
    faults_since_open_ = false;
    verify_log(after_crash, start_may_move);
  }

  // After every operation: idle positions, and a fenced partition is reopened (recovery).
  void after_op() {
    set_faults(false);
    if (f_.log->fenced()) {
      ++fences_;
      MODEL_CHECK(faults_since_open_, "fenced without an injected fault");
      std::vector<std::byte> bytes;
      auto p = new_request(bytes);
      auto r = f_.append(std::move(bytes));
      MODEL_CHECK(!r.has_value() && r.error().code() == errc::fenced,
                  "an append to a fenced partition did not fail "
                  "with fenced");
      for (const auto& t : p->tags) {
        subs_[t].st = submission::state::refused;
      }
      trace("fenced: reopen");
      f_.close();
      open_log(false, false);
    }
    f_.log->check_invariants();
    check_positions(true);
  }

  // Appends (and reads) in flight together; with `crash`, the disk stops at a random point, and after recovery
  // the model is rebuilt.
  void op_group(bool crash) {
    const bool faults = maybe_faults();
    const int n = static_cast<int>(rng_.between(1, crash ? 5 : 4));
    const bool with_retention = crash && rng_.below(4) == 0;
    std::vector<std::unique_ptr<pending_append>> appends;
    std::vector<std::unique_ptr<pending_read>> reads;
    std::optional<expected<retention_result>> retention;
    std::ostringstream desc;
    desc << (crash ? "crash group:" : "group:") << (faults ? " (write faults)" : "");
    for (int i = 0; i < n; ++i) {
      if (rng_.below(4) == 0) {
        auto p = std::make_unique<pending_read>();
        p->snap = snap();
        p->req = random_read(p->snap, false);
        desc << " [" << describe(p->req) << "]";
        auto* raw = p.get();
        reads.push_back(std::move(p));
        spawn(f_.log->read(raw->req), [raw](expected<read_result> r) { raw->result.emplace(std::move(r)); });
      }
      std::vector<std::byte> bytes;
      auto p = new_request(bytes);
      desc << " append(";
      for (const auto& t : p->tags) {
        desc << t << ":" << subs_[t].records << "x" << subs_[t].value_bytes << " ";
      }
      desc << ")";
      auto* raw = p.get();
      appends.push_back(std::move(p));
      spawn(f_.log->append(std::move(bytes)), [raw](expected<append_result> r) { raw->result.emplace(std::move(r)); });
    }
    if (with_retention) {
      desc << " retention";
      spawn(f_.log->enforce_retention(),
            [&retention](expected<retention_result> r) { retention.emplace(std::move(r)); });
    }
    std::uint64_t polls = 0;
    std::uint64_t stop_after = 1;
    if (crash) {
      polls = rng_.below(40);
      // halt() stops at the next mutating operation; stopping a few later lets a write land without its sync.
      stop_after = rng_.below(2) == 0 ? 1 : rng_.between(2, 6);
      desc << " stop after " << polls << " polls + " << stop_after << " mutating ops";
    }
    trace(desc.str());
    auto all_done = [&] {
      return std::all_of(appends.begin(), appends.end(), [](const auto& a) { return a->result.has_value(); }) &&
             std::all_of(reads.begin(), reads.end(), [](const auto& r) { return r->result.has_value(); }) &&
             (!with_retention || retention.has_value());
    };
    if (crash) {
      for (std::uint64_t i = 0; i < polls && f_.disk.in_flight() > 0; ++i) {
        f_.disk.poll(true);
      }
      if (stop_after == 1) {
        f_.disk.halt();
      } else {
        f_.disk.fail_stop_after(stop_after);
      }
      io::run_until(f_.disk, [] { return false; });
    } else {
      io::run_until(f_.disk, all_done);
    }
    MODEL_CHECK(all_done(), "work still pending with nothing in flight");

    // Acknowledged appends: dense, in request order.
    bool failed_before = false;
    for (const auto& a : appends) {
      const auto& r = *a->result;
      if (!r) {
        MODEL_CHECK(faults || crash, "append failed without a fault: " << r.error().message());
        failed_before = true;
        ++failed_appends_;
        for (const auto& t : a->tags) {
          subs_[t].st = submission::state::failed;
        }
        continue;
      }
      MODEL_CHECK(!failed_before, "an append succeeded after an earlier one of the same group failed");
      MODEL_CHECK(r->base_offset.value() == end(),
                  "append " << a->tags.front() << " got base " << r->base_offset.value() << ", expected " << end());
      MODEL_CHECK(r->batches == a->tags.size(), "append result says " << r->batches << " batches");
      MODEL_CHECK(model_.empty() || r->timestamp.value() >= model_.back().ts,
                  "timestamp " << r->timestamp.value() << " goes back from " << model_.back().ts);
      MODEL_CHECK(r->timestamp <= f_.clk.wall_ms(), "timestamp from the future");
      std::uint32_t records = 0;
      for (const auto& t : a->tags) {
        auto& s = subs_[t];
        s.st = submission::state::acked;
        model_.push_back(model_batch{end(), t, s.records, s.value_bytes, s.size, r->timestamp.value()});
        records += static_cast<std::uint32_t>(s.records);
      }
      MODEL_CHECK(r->records == records && r->last_offset.value() == end() - 1,
                  "append result records " << r->records << " last " << r->last_offset.value());
    }
    bool retention_done = false;
    if (with_retention) {
      if (retention->has_value()) {
        retention_done = true;
        const i64 ls = (*retention)->log_start.value();
        MODEL_CHECK(ls >= log_start_ && is_boundary(ls), "retention moved log_start to " << ls);
        retained_segments_ += (*retention)->segments_removed;
        log_start_ = ls;
      }
    }
    for (const auto& rd : reads) {
      check_read(rd->req, rd->snap, *rd->result, crash);
    }
    reads.clear();
    if (!crash) {
      return;
    }
    ++crashes_;
    f_.close();
    io::run_until(f_.disk, [] { return false; });
    f_.disk.crash();
    open_log(true, with_retention && !retention_done);
  }

  void op_read() {
    const snapshot s = snap();
    const auto q = random_read(s, true);
    trace(describe(q));
    auto r = f_.read(q);
    check_read(q, s, r, false);
  }

  // The new log start retention must choose: oldest segments first while the rest is over retention_bytes.
  std::pair<i64, std::uint64_t> predict_retention() const {
    const auto bases = f_.log->segment_bases();
    std::vector<std::uint64_t> sizes(bases.size(), 0);
    for (std::size_t i = log_start_ < end() ? find(log_start_) : model_.size(); i < model_.size(); ++i) {
      std::size_t s = 0;
      while (s + 1 < bases.size() && bases[s + 1].value() <= model_[i].base) {
        ++s;
      }
      sizes[s] += model_[i].size;
    }
    std::uint64_t total = 0;
    for (auto s : sizes) {
      total += s;
    }
    std::size_t remove = 0;
    std::uint64_t removed = 0;
    while (remove + 1 < bases.size()) {
      const bool too_big = total - removed > f_.options.config.retention_bytes;
      if (!too_big && sizes[remove] != 0) {
        break;
      }
      removed += sizes[remove];
      ++remove;
    }
    return {remove == 0 ? log_start_ : bases[remove].value(), remove};
  }

  void op_retention() {
    const bool faults = maybe_faults();
    const auto [expect_start, expect_removed] = predict_retention();
    trace("retention (expect log_start " + std::to_string(expect_start) + ")" + (faults ? " (write faults)" : ""));
    auto r = testing::run(f_.disk, f_.log->enforce_retention());
    if (!r) {
      MODEL_CHECK(faults, "retention failed: " << r.error().message());
      return;
    }
    MODEL_CHECK(r->log_start.value() == expect_start && r->segments_removed == expect_removed,
                "retention: log_start " << r->log_start.value() << " (" << r->segments_removed
                                        << " segments), model expects " << expect_start << " (" << expect_removed
                                        << ")");
    retained_segments_ += r->segments_removed;
    log_start_ = expect_start;
    check_positions(true);
    // Below the new start: out of range; first: the batch at the new start.
    if (log_start_ > 0) {
      const snapshot s = snap();
      read_request q;
      q.offset = offset_t(static_cast<i64>(rng_.below(static_cast<std::uint64_t>(log_start_))));
      check_read(q, s, f_.read(q), false);
      read_request first;
      first.start = read_start::first;
      first.max_bytes = 1;
      check_read(first, s, f_.read(first), false);
    }
  }

  // A read inside the oldest segments while retention removes them: it finishes from the pinned segment.
  void op_read_racing_retention() {
    const snapshot s = snap();
    read_request q = random_read(s, false);
    if (q.start == read_start::offset && s.committed > s.log_start) {
      q.offset = offset_t(static_cast<i64>(
          rng_.between(static_cast<std::uint64_t>(s.log_start), static_cast<std::uint64_t>(s.committed - 1))));
    }
    const auto [expect_start, expect_removed] = predict_retention();
    trace(describe(q) + " racing retention (expect log_start " + std::to_string(expect_start) + ")");
    std::optional<expected<read_result>> rr;
    std::optional<expected<retention_result>> ret;
    spawn(f_.log->read(q), [&rr](expected<read_result> r) { rr.emplace(std::move(r)); });
    spawn(f_.log->enforce_retention(), [&ret](expected<retention_result> r) { ret.emplace(std::move(r)); });
    io::run_until(f_.disk, [&] { return rr.has_value() && ret.has_value(); });
    MODEL_CHECK(rr.has_value() && ret.has_value(), "read or retention did not finish");
    MODEL_CHECK(ret->has_value(), "retention failed: " << ret->error().message());
    MODEL_CHECK((*ret)->log_start.value() == expect_start,
                "retention: log_start " << (*ret)->log_start.value() << ", model expects " << expect_start);
    retained_segments_ += (*ret)->segments_removed;
    check_read(q, s, *rr, false);
    rr.reset();
    log_start_ = expect_start;
  }

  void op_reopen() {
    const bool faults = maybe_faults();
    trace(std::string("close and reopen") + (faults ? " (write faults)" : ""));
    ++reopens_;
    f_.close();
    open_log(false, false);
  }

  void op_flush() {
    trace("flush");
    auto r = testing::run(f_.disk, f_.log->flush());
    MODEL_CHECK(r.has_value(), "flush: " << r.error().message());
  }

  // A request whose last batch is damaged is refused whole: nothing of it is written.
  void op_damaged_append() {
    std::vector<std::byte> bytes;
    auto p = new_request(bytes);
    const auto& last = subs_[p->tags.back()];
    const std::size_t at = bytes.size() - last.size + 61 + rng_.below(last.size - 61);  // inside its records
    bytes[at] ^= std::byte{0x40};
    trace("damaged append of " + std::to_string(p->tags.size()) + " batches, byte " + std::to_string(at));
    for (const auto& t : p->tags) {
      subs_[t].st = submission::state::refused;
    }
    const i64 before = f_.log->log_end().value();
    auto r = f_.append(std::move(bytes));
    MODEL_CHECK(!r.has_value(), "a damaged request was accepted at " << r->base_offset.value());
    MODEL_CHECK(f_.log->log_end().value() == before, "a refused request moved log_end");
  }

  std::uint64_t seed_;
  options_for_seed opts_;
  prng rng_;
  sim_log_fixture f_;
  std::uint64_t op_ = 0;
  std::deque<std::string> trace_;

  std::vector<model_batch> model_;  // every batch ever visible, contiguous from offset 0
  i64 log_start_ = 0;
  std::map<std::string, submission> subs_;
  std::map<i64, std::string> seen_;  // offset -> value, for every record a read returned
  i64 committed_max_ = 0;
  std::uint64_t next_tag_ = 0;
  bool faults_since_open_ = false;

  std::uint64_t crashes_ = 0;
  std::uint64_t reopens_ = 0;
  std::uint64_t failed_appends_ = 0;
  std::uint64_t fences_ = 0;
  std::uint64_t reads_ = 0;
  std::uint64_t retained_segments_ = 0;
  std::uint64_t recovered_batches_ = 0;
#undef MODEL_CHECK
};

options_for_seed options_for(std::uint64_t seed) {
  options_for_seed o;
  o.write_faults = seed % 3 == 0;
  o.read_window = seed % 2 == 0 ? 64 * kib : 1 * mib;
  o.preallocate = seed % 4 == 1 ? 2 * mib : 0;
  return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(log_model_suite)

// One test case per seed (case _N runs seed N + 1), so that one failing seed does not hide the others.
const std::vector<int> model_seeds = [] {
  std::vector<int> v;
  for (int s = 1; s <= 30; ++s) {
    v.push_back(s);
  }
  return v;
}();

BOOST_DATA_TEST_CASE(random_operations_match_the_model, boost::unit_test::data::make(model_seeds), seed) {
  const auto s = static_cast<std::uint64_t>(seed);
  log_model m(s, options_for(s));
  m.run();
}

// Regression: a read that starts at a batch which is not the first of its index interval moves the accepted
// batches down over the skipped ones; first_offset and next_offset must come from the headers before the move
// (they once came from the moved-over bytes: garbage offsets, and a consumer following next_offset lost a batch).
BOOST_AUTO_TEST_CASE(read_from_inside_an_index_interval_reports_its_offsets) {
  sim_log_fixture f;
  f.open();
  RILL_REQUIRE_OK(f.append(make_batch("a", 1, 100)));   // offset 0, at byte 0: the index entry
  RILL_REQUIRE_OK(f.append(make_batch("b", 1, 1000)));  // offset 1, inside the same 4 KiB index interval
  RILL_REQUIRE_OK(f.append(make_batch("c", 1, 100)));   // offset 2
  auto r = f.read_at(1);
  RILL_REQUIRE_OK(r);
  auto got = split_batches(r->bytes.span());
  BOOST_REQUIRE(!got.empty());
  BOOST_TEST(got[0].base_offset().value() == 1);  // the bytes are right
  BOOST_TEST(r->first_offset.value() == 1);
  BOOST_TEST(r->batches == 2u);
  BOOST_TEST(r->next_offset.value() == 3);
  // A consumer continues where the read says.
  auto next = f.read_at(r->next_offset.value());
  RILL_CHECK_OK(next);
}

BOOST_AUTO_TEST_SUITE_END()
