// partition_machine: a replicated partition's offsets, producers and consumer offsets (see the header).
#include "consensus/partition_machine.h"

#include <algorithm>
#include <cstring>

#include "base/assert.h"
#include "base/endian.h"
#include "storage/producer_sequence.h"
#include "storage/record_batch.h"

namespace rill::consensus {
namespace {

constexpr std::uint64_t snapshot_magic_v1 = 0x3130'6d74'7261'70ULL;  // "partm01"
constexpr std::uint64_t snapshot_magic = 0x3230'6d74'7261'70ULL;     // "partm02": producers' last timestamps
static_assert(partition_snapshot_producer_bytes ==
              8 + 2 + 4 + 8 + 4 + storage::producer_table::batches_kept * (4 + 4 + 8 + 8));
static_assert(partition_machine_options{}.consumer_name_bytes_max + 4 + 8 == partition_snapshot_consumer_bytes);
static_assert(partition_snapshot_head_bytes + partition_settings{}.producers_max * partition_snapshot_producer_bytes +
                  partition_settings{}.consumers_max * partition_snapshot_consumer_bytes <=
              partition_snapshot_bytes_budget);
constexpr std::size_t answered_head_bytes = 1 + 8 + 2 + 4 + 4 + 8;
constexpr std::size_t detail_bytes_max = 512;
constexpr std::size_t produce_reply_head_bytes = 1 + 8 + 4 + 8 + 8;
constexpr std::size_t offset_reply_bytes = 1 + 8 + 8;

struct reader {
  std::span<const std::byte> in;
  bool ok = true;
  template <class T>
  T get() {
    if (!ok || in.size() < sizeof(T)) {
      ok = false;
      return T{};
    }
    const T v = load_le<T>(in.data());
    in = in.subspan(sizeof(T));
    return v;
  }
  std::string bytes(std::size_t n) {
    if (!ok || in.size() < n) {
      ok = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(in.data()), n);
    in = in.subspan(n);
    return s;
  }
};

void append_bytes(std::vector<std::byte>& out, std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out.insert(out.end(), p, p + s.size());
}

// The records a producer batch covers (dense: last_offset_delta + 1; asserted when it was validated).
std::int64_t records_of(const storage::batch_view& v) {
  return std::int64_t{v.last_offset_delta()} + 1;
}

std::vector<std::byte> encode_produce_reply(const partition_machine::produce_reply& r) {
  std::vector<std::byte> out;
  out.reserve(produce_reply_head_bytes + r.detail.size());
  append_le<std::uint8_t>(out, static_cast<std::uint8_t>(r.verdict));
  append_le<std::int64_t>(out, r.base_offset);
  append_le<std::uint32_t>(out, r.records);
  append_le<std::uint64_t>(out, r.op);
  append_le<std::int64_t>(out, r.timestamp_ms);
  append_bytes(out, r.detail);
  return out;
}

}  // namespace

partition_machine::partition_machine(partition_machine_options options, wall_clock now_ms)
    : options_(options), now_ms_(std::move(now_ms)) {
  RILL_ASSERT(now_ms_ != nullptr);
  RILL_ASSERT(options_.consumer_name_bytes_max >= 1);
  RILL_ASSERT(options_.snapshot_bytes_budget <= partition_snapshot_bytes_budget);
  RILL_ASSERT(within_limits(settings_));
}

bool within_limits(const partition_settings& s) noexcept {
  return s.consumers_max >= 1 && s.consumers_max <= partition_consumers_limit && s.producers_max >= 1 &&
         s.producers_max <= partition_producers_limit && s.producer_expiry_ms >= producer_expiry_ms_min &&
         s.producer_expiry_ms <= producer_expiry_ms_limit;
}

std::uint64_t partition_machine::snapshot_bytes_max(std::uint64_t producers_max, std::uint64_t consumers,
                                                    std::size_t consumer_name_bytes_max) noexcept {
  return partition_snapshot_head_bytes + producers_max * partition_snapshot_producer_bytes +
         consumers * (4 + 8 + consumer_name_bytes_max);
}

bool partition_machine::accepts(const partition_settings& s) const noexcept {
  return within_limits(s) &&
         snapshot_bytes_max(s.producers_max, std::max<std::uint64_t>(s.consumers_max, consumers_.size()),
                            options_.consumer_name_bytes_max) <= options_.snapshot_bytes_budget;
}

std::vector<std::byte> partition_machine::settings_request(const partition_settings& s) {
  std::vector<std::byte> out;
  append_le<std::uint64_t>(out, s.consumers_max);
  append_le<std::uint64_t>(out, s.producers_max);
  append_le<std::uint64_t>(out, s.producer_expiry_ms);
  return out;
}

std::vector<std::byte> partition_machine::produce_request(std::span<const std::byte> batch, std::uint32_t crc_tail) {
  std::vector<std::byte> out;
  out.reserve(4 + batch.size());
  append_le<std::uint32_t>(out, crc_tail);
  out.insert(out.end(), batch.begin(), batch.end());
  return out;
}

std::vector<std::byte> partition_machine::offset_request(std::string_view consumer, std::int64_t offset) {
  std::vector<std::byte> out;
  append_le<std::int64_t>(out, offset);
  append_bytes(out, consumer);
  return out;
}

std::optional<partition_machine::produce_reply> partition_machine::decode_produce_reply(
    std::span<const std::byte> body) {
  reader r{body};
  produce_reply p;
  const auto verdict = r.get<std::uint8_t>();
  p.base_offset = r.get<std::int64_t>();
  p.records = r.get<std::uint32_t>();
  p.op = r.get<std::uint64_t>();
  p.timestamp_ms = r.get<std::int64_t>();
  if (!r.ok || verdict > static_cast<std::uint8_t>(storage::producer_verdict::unknown_producer_id)) {
    return std::nullopt;
  }
  p.verdict = static_cast<storage::producer_verdict>(verdict);
  p.detail = r.bytes(r.in.size());
  return p;
}

std::optional<partition_machine::offset_reply> partition_machine::decode_offset_reply(std::span<const std::byte> body) {
  if (body.size() != offset_reply_bytes) {
    return std::nullopt;
  }
  reader r{body};
  offset_reply o;
  const auto status = r.get<std::uint8_t>();
  if (status > static_cast<std::uint8_t>(offset_status::behind)) {
    return std::nullopt;
  }
  o.status = static_cast<offset_status>(status);
  o.previous = r.get<std::int64_t>();
  o.next_offset = r.get<std::int64_t>();
  return o;
}

std::int64_t partition_machine::expire_before(std::int64_t time) const noexcept {
  return time - static_cast<std::int64_t>(settings_.producer_expiry_ms);
}

void partition_machine::absorb(const header& prepare, std::span<const std::byte> body) {
  const auto v = storage::batch_view::trusted(body);
  RILL_ASSERT(v.base_offset().value() == next_offset_, "op {}'s batch was stamped at offset {}; the log ends at {}",
              prepare.op, v.base_offset().value(), next_offset_);
  const std::int64_t records = records_of(v);
  const std::int64_t time = v.max_timestamp().value();  // its log-append time (prepare stamped it)
  last_timestamp_ = std::max(last_timestamp_, time);
  // Producers idle past their expiry, judged by this batch's time, are forgotten first (finding 4).
  if (settled_) {
    (void)producers_.trim(expire_before(time), settings_.producers_max);
  }
  if (v.producer_id() >= 0) {
    // Fresh when the primary prepared it, against this same history before the trims since (prepare() answered
    // anything else): a producer still held has moved on only by the batches prepare() saw pending; one the trims
    // forgot starts again at this batch.
    const auto c = producers_.check(v.producer_id(), v.producer_epoch(), v.base_sequence(), records);
    RILL_ASSERT(c.verdict == storage::producer_verdict::fresh ||
                    (c.verdict == storage::producer_verdict::unknown_producer_id && !producers_.find(v.producer_id())),
                "op {}: a batch of producer {} in the log was {}", prepare.op, v.producer_id(),
                storage::to_string(c.verdict));
    producers_.record(v.producer_id(), v.producer_epoch(),
                      storage::producer_batch{v.base_sequence(), storage::last_sequence_of(v.base_sequence(), records),
                                              next_offset_, prepare.op},
                      time);
    // Beyond the bound, the producers idle longest go (never this one: it is the newest).
    if (settled_) {
      (void)producers_.trim(expire_before(time), settings_.producers_max, v.producer_id());
    }
  }
  RILL_ASSERT(!settled_ || producers_.size() <= settings_.producers_max);
  next_offset_ += records;
}

void partition_machine::skip(const header& prepare, std::span<const std::byte> body) {
  if (prepare.operation == operation_produce_batch) {
    absorb(prepare, body);
  }
}

state_machine::proposal partition_machine::prepare(const header& request, const prepare_context& at,
                                                   std::vector<std::byte> body,
                                                   std::span<const message* const> pending) {
  if (request.operation != operation_produce_batch) {
    return {request.operation, std::move(body)};
  }
  // Only this node's partition actor submits, with a batch it validated (the CRC tail came from that validation).
  RILL_ASSERT(body.size() > 4, "a produce request of {} bytes", body.size());
  const auto crc_tail = load_le<std::uint32_t>(body.data());
  body.erase(body.begin(), body.begin() + 4);
  const auto v = storage::batch_view::trusted(body);
  const std::int64_t records = records_of(v);

  // Where the batch goes, and its producer as it will be once every pending op is applied.
  std::int64_t base = next_offset_;
  std::int64_t time = last_timestamp_;
  std::optional<storage::producer_state> producer;
  if (v.producer_id() >= 0) {
    producer = producers_.find(v.producer_id());
  }
  for (const message* m : pending) {
    if (m->h.operation != operation_produce_batch) {
      continue;
    }
    const auto p = storage::batch_view::trusted(m->body);
    base = p.next_offset().value();
    time = std::max(time, p.max_timestamp().value());
    if (v.producer_id() >= 0 && p.producer_id() == v.producer_id()) {
      const std::int64_t n = records_of(p);
      if (!producer) {
        producer.emplace();
      }
      storage::producer_table::record(
          *producer, p.producer_epoch(),
          storage::producer_batch{p.base_sequence(), storage::last_sequence_of(p.base_sequence(), n),
                                  p.base_offset().value(), m->h.op},
          p.max_timestamp().value());
    }
  }
  storage::producer_check c;
  if (v.producer_id() >= 0) {
    c = storage::producer_table::check(producer, v.producer_id(), v.producer_epoch(), v.base_sequence(), records);
  }
  if (c.verdict == storage::producer_verdict::fresh) {
    time = std::max(time, now_ms_());
    storage::stamp_batch(body, offset_t(base), epoch_t(static_cast<std::int32_t>(at.view.value())),
                         timestamp_ms_t(time), crc_tail);
    return {operation_produce_batch, std::move(body)};
  }
  std::vector<std::byte> answer;
  answer.reserve(answered_head_bytes + std::min(c.detail.size(), detail_bytes_max));
  append_le<std::uint8_t>(answer, static_cast<std::uint8_t>(c.verdict));
  append_le<std::int64_t>(answer, v.producer_id());
  append_le<std::int16_t>(answer, v.producer_epoch());
  append_le<std::int32_t>(answer, v.base_sequence());
  append_le<std::int32_t>(answer, storage::last_sequence_of(v.base_sequence(), records));
  append_le<std::uint64_t>(answer, c.original ? c.original->tag : 0);
  append_bytes(answer, std::string_view(c.detail).substr(0, detail_bytes_max));
  return {operation_produce_answered, std::move(answer)};
}

std::vector<std::byte> partition_machine::apply(const header& prepare, std::span<const std::byte> body) {
  if (prepare.operation == operation_produce_batch) {
    const std::int64_t base = next_offset_;
    absorb(prepare, body);
    return encode_produce_reply(produce_reply{storage::producer_verdict::fresh,
                                              base,
                                              static_cast<std::uint32_t>(next_offset_ - base),
                                              prepare.op,
                                              storage::batch_view::trusted(body).max_timestamp().value(),
                                              {}});
  }
  if (prepare.operation == operation_produce_answered) {
    reader r{body};
    produce_reply out;
    const auto verdict = r.get<std::uint8_t>();
    const auto id = r.get<std::int64_t>();
    (void)r.get<std::int16_t>();
    const auto first = r.get<std::int32_t>();
    const auto last = r.get<std::int32_t>();
    const auto original = r.get<std::uint64_t>();
    RILL_ASSERT(r.ok && verdict <= static_cast<std::uint8_t>(storage::producer_verdict::unknown_producer_id) &&
                    verdict != static_cast<std::uint8_t>(storage::producer_verdict::fresh),
                "op {}: a malformed answered produce", prepare.op);
    out.verdict = static_cast<storage::producer_verdict>(verdict);
    out.detail = r.bytes(r.in.size());
    if (out.verdict == storage::producer_verdict::duplicate) {
      // The original precedes this op in the log, so it is applied by now; it may have left the kept batches since
      // (a producer far ahead of its retry): then its offset is no longer known.
      out.verdict = storage::producer_verdict::duplicate_sequence;
      if (const auto p = producers_.find(id)) {
        for (const auto& b : p->recent) {
          if (b.first_sequence == first && b.last_sequence == last && b.tag == original) {
            out.verdict = storage::producer_verdict::duplicate;
            out.base_offset = b.base_offset;
            out.records = static_cast<std::uint32_t>(storage::sequence_distance(first, last) + 1);
            out.op = original;
          }
        }
      }
      if (out.verdict == storage::producer_verdict::duplicate_sequence) {
        out.detail = "a retry of a batch stored before, whose offset is no longer kept";
      }
    }
    return encode_produce_reply(out);
  }
  std::vector<std::byte> reply;
  if (prepare.operation == operation_probe) {
    return reply;
  }
  if (prepare.operation == operation_partition_settings) {
    reader r{body};
    partition_settings s;
    s.consumers_max = r.get<std::uint64_t>();
    s.producers_max = r.get<std::uint64_t>();
    s.producer_expiry_ms = r.get<std::uint64_t>();
    if (r.ok && r.in.empty() && accepts(s)) {
      settings_ = s;
      if (!settled_) {
        settled_ = true;
        producers_.stamp_all(last_timestamp_);  // (times recorded before may differ between replicas)
      }
      (void)producers_.trim(expire_before(last_timestamp_), settings_.producers_max);
    }
    return reply;
  }
  if (prepare.operation == operation_consumer_offset || prepare.operation == operation_consumer_offset_reset) {
    const bool reset = prepare.operation == operation_consumer_offset_reset;
    reader r{body};
    const auto offset = r.get<std::int64_t>();
    const std::string name = r.bytes(r.in.size());
    offset_status status = offset_status::stored;
    std::int64_t previous = -1;
    if (!r.ok || name.empty() || name.size() > options_.consumer_name_bytes_max) {
      status = offset_status::invalid_name;
    } else if (offset < 0 || offset > next_offset_) {
      status = offset_status::out_of_range;
    } else if (auto it = consumers_.find(name); it != consumers_.end()) {
      previous = it->second;
      if (offset >= it->second || reset) {
        it->second = offset;
      } else {
        status = offset_status::behind;  // never back, unless on purpose
      }
      RILL_ASSERT(reset || it->second >= previous, "consumer '{}' moved back from {} to {}", name, previous,
                  it->second);
    } else if (consumers_.size() >= settings_.consumers_max) {
      status = offset_status::limit_exceeded;
    } else {
      consumers_.emplace(name, offset);
    }
    append_le<std::uint8_t>(reply, static_cast<std::uint8_t>(status));
    append_le<std::int64_t>(reply, previous);
    append_le<std::int64_t>(reply, next_offset_);
    return reply;
  }
  // An operation this version does not know: committed all the same, answered with nothing (the submitter refuses
  // an empty reply). Never reached from this node's own requests.
  return reply;
}

std::optional<std::int64_t> partition_machine::consumer_offset(const std::string& name) const {
  auto it = consumers_.find(name);
  return it == consumers_.end() ? std::nullopt : std::optional<std::int64_t>(it->second);
}

std::vector<std::byte> partition_machine::snapshot() const {
  std::vector<std::byte> out;
  append_le<std::uint64_t>(out, snapshot_magic);
  append_le<std::int64_t>(out, next_offset_);
  append_le<std::int64_t>(out, last_timestamp_);
  append_le<std::uint64_t>(out, settings_.consumers_max);
  append_le<std::uint64_t>(out, settings_.producers_max);
  append_le<std::uint64_t>(out, settings_.producer_expiry_ms);
  append_le<std::uint8_t>(out, settled_ ? 1 : 0);
  append_le<std::uint64_t>(out, producers_.size());
  for (const auto& [id, p] : producers_.producers()) {
    append_le<std::int64_t>(out, id);
    append_le<std::int16_t>(out, p.epoch);
    append_le<std::int32_t>(out, p.last_sequence);
    append_le<std::int64_t>(out, p.last_timestamp_ms);
    append_le<std::uint32_t>(out, static_cast<std::uint32_t>(p.recent.size()));
    for (const auto& b : p.recent) {
      append_le<std::int32_t>(out, b.first_sequence);
      append_le<std::int32_t>(out, b.last_sequence);
      append_le<std::int64_t>(out, b.base_offset);
      append_le<std::uint64_t>(out, b.tag);
    }
  }
  append_le<std::uint64_t>(out, consumers_.size());
  for (const auto& [name, offset] : consumers_) {
    append_le<std::uint32_t>(out, static_cast<std::uint32_t>(name.size()));
    append_bytes(out, name);
    append_le<std::int64_t>(out, offset);
  }
  RILL_ASSERT(!settled_ || out.size() <= options_.snapshot_bytes_budget,
              "a partition snapshot of {} bytes, past its budget {}", out.size(), options_.snapshot_bytes_budget);
  return out;
}

bool partition_machine::restore(std::span<const std::byte> bytes) {
  reader r{bytes};
  const auto magic = r.get<std::uint64_t>();
  if (!r.ok || (magic != snapshot_magic && magic != snapshot_magic_v1)) {
    return false;
  }
  const bool timed = magic == snapshot_magic;
  const auto next = r.get<std::int64_t>();
  const auto last_time = r.get<std::int64_t>();
  partition_settings settings;  // the first version's: the defaults, not settled
  bool settled = false;
  if (timed) {
    settings.consumers_max = r.get<std::uint64_t>();
    settings.producers_max = r.get<std::uint64_t>();
    settings.producer_expiry_ms = r.get<std::uint64_t>();
    const auto flag = r.get<std::uint8_t>();
    if (!r.ok || !within_limits(settings) || flag > 1) {
      return false;
    }
    settled = flag == 1;
  }
  storage::producer_table producers;
  const auto producer_count = r.get<std::uint64_t>();
  for (std::uint64_t i = 0; r.ok && i < producer_count; ++i) {
    const auto id = r.get<std::int64_t>();
    storage::producer_state p;
    p.epoch = r.get<std::int16_t>();
    p.last_sequence = r.get<std::int32_t>();
    p.last_timestamp_ms = timed ? r.get<std::int64_t>() : last_time;  // (unsettled: unused until stamped)
    const auto kept = r.get<std::uint32_t>();
    if (kept == 0 || kept > storage::producer_table::batches_kept) {
      return false;
    }
    for (std::uint32_t k = 0; r.ok && k < kept; ++k) {
      storage::producer_batch b;
      b.first_sequence = r.get<std::int32_t>();
      b.last_sequence = r.get<std::int32_t>();
      b.base_offset = r.get<std::int64_t>();
      b.tag = r.get<std::uint64_t>();
      p.recent.push_back(b);
    }
    if (!r.ok || id < 0 || p.epoch < 0 || p.recent.back().last_sequence != p.last_sequence) {
      return false;
    }
    producers.put(id, p);
    if (producers.size() > partition_producers_limit) {
      return false;
    }
  }
  std::map<std::string, std::int64_t> consumers;
  const auto consumer_count = r.get<std::uint64_t>();
  for (std::uint64_t i = 0; r.ok && i < consumer_count; ++i) {
    const auto size = r.get<std::uint32_t>();
    if (size == 0 || size > options_.consumer_name_bytes_max) {
      return false;
    }
    std::string name = r.bytes(size);
    const auto offset = r.get<std::int64_t>();
    if (!r.ok || offset < 0 || offset > next) {
      return false;
    }
    consumers.emplace(std::move(name), offset);
    if (consumers.size() > partition_consumers_limit) {
      return false;
    }
  }
  if (!r.ok || !r.in.empty() || next < 0) {
    return false;
  }
  next_offset_ = next;
  last_timestamp_ = last_time;
  settings_ = settings;
  settled_ = settled;
  producers_ = std::move(producers);
  consumers_ = std::move(consumers);
  return true;
}

}  // namespace rill::consensus
