// rill_driver: produce and poll through the client library.
#include "tools/load/rill_driver.h"

#include <chrono>
#include <random>
#include <thread>

#include <fmt/core.h>

#include "net/client.h"
#include "net/group_consumer.h"
#include "storage/producer_sequence.h"
#include "storage/record_batch.h"
#include "storage/record_batch_builder.h"

namespace rill::bench {
namespace {

using namespace rill::net;

net::client_options client_opts(const load_options& o) {
  client_options c;
  c.server = o.server;
  return c;
}

struct unit_ref {
  std::uint32_t stream_id = 0;
  std::uint32_t topic_id = 0;
  std::uint32_t partition = 0;
};

class rill_producer final : public producer_driver {
 public:
  rill_producer(std::unique_ptr<client> c, const std::vector<unit_ref>& units, bool zstd)
      : client_(std::move(c)),
        units_(units),
        builder_(zstd ? storage::compression::zstd : storage::compression::none),
        sequences_(units.size(), 0) {
    std::random_device rd;
    producer_id_ = static_cast<std::int64_t>((std::uint64_t{rd()} << 31) ^ rd()) & 0x3fffffffffffffffLL;
  }

  expected<void> send(std::uint32_t unit, std::span<const bench_message> batch) override {
    // One builder and one batch buffer, reused (as the client library's producer does).
    storage::batch_builder& b = builder_;
    b.reset();
    b.producer(producer_id_, 0, sequences_[unit]);
    b.base_timestamp(timestamp_ms_t(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count()));
    for (const auto& m : batch) {
      b.add(m.key.empty() ? std::nullopt : std::optional(storage::as_bytes(m.key)), m.value);
    }
    if (auto built = b.build_into(batch_); !built) {
      return unexpected(built.error());
    }
    const auto& u = units_[unit];
    auto r = client_->produce(by_id(u.stream_id), by_id(u.topic_id), u.partition, batch_);
    if (!r) {
      return unexpected(r.error());
    }
    sequences_[unit] = storage::sequence_plus(sequences_[unit], static_cast<std::int64_t>(batch.size()));
    return {};
  }

 private:
  std::unique_ptr<client> client_;
  const std::vector<unit_ref>& units_;
  storage::batch_builder builder_;
  std::vector<std::byte> batch_;
  std::int64_t producer_id_ = 0;
  std::vector<std::int32_t> sequences_;
};

class rill_consumer final : public consumer_driver {
 public:
  rill_consumer(std::unique_ptr<client> c, const std::vector<unit_ref>& all, std::vector<std::uint32_t> mine,
                std::uint32_t fetch)
      : client_(std::move(c)), fetch_(fetch) {
    for (const auto u : mine) {
      parts_.push_back(part{all[u], 0});
    }
  }

  expected<std::size_t> poll(const on_message& on) override {
    // One long poll when this consumer has one partition; otherwise a round over all of them without waiting,
    // and a short sleep when the whole round found nothing.
    const bool single = parts_.size() == 1;
    std::size_t total = 0;
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      auto& p = parts_[(next_ + i) % parts_.size()];
      proto::PollRequest req;
      req.mutable_stream()->set_id(p.ref.stream_id);
      req.mutable_topic()->set_id(p.ref.topic_id);
      req.set_partition_id(p.ref.partition);
      req.mutable_strategy()->set_kind(proto::PollStrategy::OFFSET);
      req.mutable_strategy()->set_value(p.position);
      req.set_max_records(fetch_);
      req.set_max_wait_ms(single ? 100 : 0);
      auto r = client_->poll(req);
      if (!r) {
        return unexpected(r.error());
      }
      RILL_TRY(n, walk(r->batches, p, on));
      p.position = std::max(p.position, r->header.next_offset());
      total += n;
    }
    next_ = (next_ + 1) % parts_.size();
    if (total == 0 && !single) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return total;
  }

  std::string positions() const override {
    std::string out;
    for (const auto& p : parts_) {
      out += fmt::format("{}stream {} partition {} offset {}", out.empty() ? "" : ", ", p.ref.stream_id,
                         p.ref.partition, p.position);
    }
    return out;
  }

 private:
  struct part {
    unit_ref ref;
    std::uint64_t position = 0;  // next offset to read
  };

  // Every record at or after the partition's position, checked (CRC, structure) but not copied.
  expected<std::size_t> walk(std::span<const std::byte> batches, const part& p, const on_message& on) {
    std::size_t n = 0;
    RILL_TRY_VOID(for_each_record(
        batches, scratch_, [&](const storage::batch_view& v, const storage::record_view& rec) -> expected<void> {
          const auto offset = v.base_offset().value() + static_cast<std::uint64_t>(rec.offset_delta);
          if (offset >= p.position) {
            on(rec.value ? *rec.value : std::span<const std::byte>());
            ++n;
          }
          return {};
        }));
    return n;
  }

  std::unique_ptr<client> client_;
  std::uint32_t fetch_;
  std::vector<part> parts_;
  std::size_t next_ = 0;
  std::vector<std::byte> scratch_;
};

// A consumer-group member: polls whatever its assignment holds, records seen where they lie.
class rill_group_member final : public consumer_driver {
 public:
  explicit rill_group_member(std::unique_ptr<group_consumer> member) : member_(std::move(member)) {}
  ~rill_group_member() override { (void)member_->close(); }

  expected<std::size_t> poll(const on_message& on) override {
    return member_->poll_each([&](const group_consumer::origin&, const storage::batch_view&,
                                  const storage::record_view& rec) -> expected<void> {
      on(rec.value ? *rec.value : std::span<const std::byte>());
      return {};
    });
  }

  std::string positions() const override {
    std::string out;
    for (const auto& a : member_->assignments()) {
      out += fmt::format("{}member {} generation {} owns {} partitions", out.empty() ? "" : ", ", a.member_id,
                         a.generation, a.owned.size());
    }
    return out;
  }

 private:
  std::unique_ptr<group_consumer> member_;
};

class rill_system final : public system_driver {
 public:
  explicit rill_system(const load_options& o) : o_(o) {}

  std::string name() const override { return "rill"; }

  std::string settings() const override {
    return fmt::format("rill: {}; one produce request of {} messages in flight per producer; compression {}",
                       o_.sync == "before-ack"
                           ? "topic durability sync_before_ack (acknowledged after the fdatasync covering the batch)"
                           : "topic durability every_ms 1000 (acknowledged at write; background fdatasync; consumers "
                             "see synced data only)",
                       o_.batch, o_.compression);
  }

  expected<void> setup() override {
    RILL_TRY(c, client::connect(client_opts(o_)));
    admin_ = std::move(c);
    proto::TopicConfig cfg;
    cfg.set_partitions(o_.partitions);
    if (o_.replication_factor > 0) {
      cfg.set_replication_factor(o_.replication_factor);
    }
    if (o_.sync == "before-ack") {
      cfg.set_durability(proto::DURABILITY_SYNC_BEFORE_ACK);
    } else {
      cfg.set_durability(proto::DURABILITY_EVERY_MS);
      cfg.set_sync_every_ms(1000);
    }
    for (std::uint32_t s = 0; s < o_.streams; ++s) {
      const auto name = fmt::format("{}-{}", o_.name_prefix, s);
      auto st = admin_->create_stream(name);
      if (!st) {
        return load_error(fmt::format("create stream {}: {} (a kept run's stream? delete it or pass --name-prefix)",
                                      name, st.error().message()));
      }
      created_.push_back(st->id());
      RILL_TRY(t, admin_->create_topic(by_id(st->id()), "bench", cfg));
      for (std::uint32_t p = 0; p < o_.partitions; ++p) {
        units_.push_back(unit_ref{st->id(), t.id(), p});
      }
    }
    return {};
  }

  expected<void> teardown() override {
    for (const auto id : created_) {
      RILL_TRY_VOID(admin_->delete_stream(by_id(id)));
    }
    created_.clear();
    return {};
  }

  expected<std::unique_ptr<producer_driver>> make_producer(std::uint32_t) override {
    RILL_TRY(c, client::connect(client_opts(o_)));
    return std::unique_ptr<producer_driver>(new rill_producer(std::move(c), units_, o_.compression == "zstd"));
  }

  expected<std::unique_ptr<consumer_driver>> make_consumer(std::uint32_t, std::vector<std::uint32_t> units) override {
    if (!o_.group.empty()) {
      return make_group_consumer();
    }
    RILL_TRY(c, client::connect(client_opts(o_)));
    return std::unique_ptr<consumer_driver>(new rill_consumer(std::move(c), units_, std::move(units), o_.fetch));
  }

 private:
  // A member of the run's group in every topic: which partitions it reads is the group's business.
  expected<std::unique_ptr<consumer_driver>> make_group_consumer() {
    group_consumer_options g;
    g.connection = client_opts(o_);
    g.group = o_.group;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> topics;
    for (const auto& u : units_) {
      if (topics.empty() || topics.back() != std::make_pair(u.stream_id, u.topic_id)) {
        topics.emplace_back(u.stream_id, u.topic_id);
        g.topics.push_back(group_subscription{by_id(u.stream_id), by_id(u.topic_id)});
      }
    }
    g.max_records = o_.fetch;
    g.max_wait = std::chrono::milliseconds(100);
    RILL_TRY(member, group_consumer::create(g));
    return std::unique_ptr<consumer_driver>(new rill_group_member(std::move(member)));
  }

  const load_options& o_;
  std::unique_ptr<client> admin_;
  std::vector<std::uint32_t> created_;
  std::vector<unit_ref> units_;
};

}  // namespace

std::unique_ptr<system_driver> make_rill_driver(const load_options& options) {
  return std::make_unique<rill_system>(options);
}

}  // namespace rill::bench
