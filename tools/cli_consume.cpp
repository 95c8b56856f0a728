// rill consume (see cli_consume.h).
#include "tools/cli_consume.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "base/assert.h"
#include "net/errc.h"
#include "net/status.h"
#include "tools/cli_groups.h"
#include "tools/cli_output.h"
#include "tools/cli_record_output.h"
#include "tools/cli_start_position.h"

namespace rill::cli {
namespace {

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) {
  g_stop = 1;
}

// Without SA_RESTART, so a wait in progress sees EINTR; installed even where the shell started us with SIGINT
// ignored (a background job), so `kill -INT` ends a follow as Ctrl-C does.
void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// Sleeps `d`, or less when a stop signal arrives.
void sleep_unless_stopped(std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (g_stop == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(20),
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()) +
            std::chrono::milliseconds(1)));
  }
}

int usage_error(const rill::error& e) {
  return cli::usage_error(e.detail());
}

constexpr auto reconnect_backoff_min = std::chrono::milliseconds(100);
constexpr auto reconnect_backoff_max = std::chrono::milliseconds(5'000);
static_assert(reconnect_backoff_min <= reconnect_backoff_max);
// Records asked of one partition per poll: a bound on how long one partition holds the others' turn.
constexpr std::uint32_t poll_records_max = 1000;
// An idle round of follow polls waits about this long in all (split among the partitions' long polls).
constexpr auto idle_round_wait = std::chrono::milliseconds(1000);
constexpr auto idle_poll_wait_min = std::chrono::milliseconds(20);

// One partition being read.
struct cursor {
  std::uint32_t partition = 0;
  proto::PollStrategy next;                  // where its next poll starts
  std::optional<std::int64_t> printed_last;  // the last offset printed
  std::optional<std::int64_t> stored_next;   // the offset last stored for the named consumer
  bool caught_up = false;                    // its last poll returned nothing
};

class consume_run {
 public:
  consume_run(const consume_args& args, net::client& c, record_output output)
      : args_(args),
        client_(c),
        output_(std::move(output)),
        stream_(net::by_name(args.stream)),
        topic_(net::by_name(args.topic)) {}

  // Resolves the start position of each partition read (`end` needs each partition's high watermark now).
  expected<void> start(const start_position& from) {
    RILL_TRY(topic, client_.get_topic(stream_, topic_));
    for (const auto& p : topic.partitions()) {
      if (args_.partition && p.id() != *args_.partition) {
        continue;
      }
      cursor c;
      c.partition = p.id();
      start_position at = from;
      if (at.at == start_position::kind::end) {
        at = start_position{start_position::kind::offset, p.high_watermark()};
      }
      c.next = poll_strategy_for(at);
      cursors_.push_back(c);
    }
    if (cursors_.empty()) {
      return rill::unexpected(net::make_error_code(net::status::partition_not_found),
                              fmt::format("partition {} of topic '{}' not found (it has {})",
                                          args_.partition.value_or(0), args_.topic, topic.partitions_size()));
    }
    return {};
  }

  int run() {
    RILL_ASSERT(!cursors_.empty());
    auto wait = std::chrono::milliseconds(0);
    while (g_stop == 0) {
      bool round_got_data = false;
      bool all_caught_up = true;
      for (auto& cur : cursors_) {
        if (g_stop != 0) {
          break;
        }
        if (!args_.follow && cur.caught_up) {
          continue;
        }
        auto polled = poll_one(cur, wait);
        if (!polled) {
          if (args_.follow && server_lost(polled.error())) {
            if (!reconnect(polled.error())) {
              break;  // stopped while reconnecting
            }
            round_got_data = true;  // poll again at once
            continue;
          }
          return finish(report(polled.error()));
        }
        round_got_data = round_got_data || *polled;
        all_caught_up = all_caught_up && cur.caught_up;
        if (args_.count > 0 && printed_ >= args_.count) {
          return finish(0);
        }
      }
      if (!args_.follow && all_caught_up) {
        return finish(0);
      }
      const auto per_partition = idle_round_wait / static_cast<int>(cursors_.size());
      wait = round_got_data ? std::chrono::milliseconds(0) : std::max(per_partition, idle_poll_wait_min);
    }
    return finish(0);
  }

 private:
  // Polls one partition and prints what came; true when it returned any batch.
  expected<bool> poll_one(cursor& cur, std::chrono::milliseconds wait) {
    proto::PollRequest req;
    *req.mutable_stream() = stream_;
    *req.mutable_topic() = topic_;
    req.set_partition_id(cur.partition);
    *req.mutable_strategy() = cur.next;
    if (!args_.consumer.empty()) {
      req.mutable_consumer()->set_name(args_.consumer);  // NEXT starts from its stored offset
    }
    const std::uint64_t left = args_.count > 0 ? args_.count - printed_ : poll_records_max;
    req.set_max_records(static_cast<std::uint32_t>(std::min<std::uint64_t>(left, poll_records_max)));
    req.set_max_wait_ms(static_cast<std::uint32_t>(wait.count()));
    req.set_from_replica(args_.from_replica);
    RILL_TRY(r, client_.poll(req));
    RILL_TRY(records, net::decode_records(cur.partition, r.batches));
    std::string out;
    for (const auto& rec : records) {
      if (args_.count > 0 && printed_ == args_.count) {
        break;
      }
      // A batch may start before the position the poll resolved to: skip what precedes it.
      if (rec.offset < static_cast<std::int64_t>(r.header.start_offset())) {
        continue;
      }
      ++printed_;
      cur.printed_last = rec.offset;
      out += output_.json ? record_json_as(output_, rec).dump() + "\n" : record_text(output_, rec);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    cur.caught_up = r.header.batches() == 0;
    // From here on the partition is read by offset: after a reconnect it resumes exactly where it was (the
    // resolved start when nothing came yet, so `last` or a timestamp is not resolved again later).
    const bool stopped_inside = args_.count > 0 && printed_ >= args_.count && cur.printed_last;
    cur.next.set_kind(proto::PollStrategy::OFFSET);
    cur.next.set_value(stopped_inside ? static_cast<std::uint64_t>(*cur.printed_last + 1) : r.header.next_offset());
    RILL_TRY_VOID(store(cur));
    return r.header.batches() > 0;
  }

  // Stores the named consumer's offset of `cur` after what was printed, when it moved.
  expected<void> store(cursor& cur) {
    if (args_.consumer.empty() || !cur.printed_last || cur.stored_next == *cur.printed_last + 1) {
      return {};
    }
    const auto next = *cur.printed_last + 1;
    RILL_TRY_VOID(
        client_.store_offset(stream_, topic_, cur.partition, args_.consumer, static_cast<std::uint64_t>(next)));
    cur.stored_next = next;
    return {};
  }

  // Until the server answers again (true) or a stop signal (false).
  bool reconnect(const rill::error& why) {
    notice("reconnecting", fmt::format("lost the server ({}), reconnecting", why.message()));
    auto backoff = reconnect_backoff_min;
    while (g_stop == 0) {
      sleep_unless_stopped(backoff);
      if (g_stop != 0) {
        break;
      }
      if (client_.ping()) {
        notice("reconnected", "reconnected");
        return true;
      }
      backoff = std::min(backoff * 2, reconnect_backoff_max);
    }
    return false;
  }

  // Stores what is left to store, then exits with `rc` (or the store's failure when rc is 0).
  int finish(int rc) {
    for (auto& cur : cursors_) {
      if (auto s = store(cur); !s && rc == 0) {
        rc = report(s.error());
      }
    }
    return rc;
  }

  const consume_args& args_;
  net::client& client_;
  record_output output_;
  proto::Identifier stream_;
  proto::Identifier topic_;
  std::vector<cursor> cursors_;
  std::uint64_t printed_ = 0;
};

}  // namespace

bool server_lost(const rill::error& e) {
  if (e.code().category() == net::net_category()) {
    const auto c = e.code();
    return c == net::make_error_code(net::errc::connection_closed) ||
           c == net::make_error_code(net::errc::connect_failed) || c == net::make_error_code(net::errc::timed_out);
  }
  if (e.code().category() == net::status_category()) {
    return net::is_retriable(static_cast<net::status>(e.code().value()));
  }
  return false;
}

int consume(const consume_args& args) {
  install_stop_handlers();
  record_output output;
  output.json = args.json_output;
  auto values = parse_value_format(args.value_format);
  if (!values) {
    return usage_error(values.error());
  }
  output.values = *values;
  if (args.format) {
    auto t = parse_record_template(*args.format);
    if (!t) {
      return usage_error(t.error());
    }
    output.format = std::move(*t);
  }
  if (auto ok = check_record_output(output); !ok) {
    return usage_error(ok.error());
  }
  if (!args.group.empty()) {
    group_consume_args g;
    g.connection = args.connection;
    g.output = output;
    g.stream = args.stream;
    g.topic = args.topic;
    g.group = args.group;
    g.member_id = args.member_id;
    g.follow = args.follow;
    g.count = args.count;
    g.config = args.group_config;
    return group_consume(g);
  }
  auto from = args.since ? parse_since(*args.since, std::chrono::system_clock::now()) : parse_from(args.from);
  if (!from) {
    return usage_error(from.error());
  }
  net::client_options co = args.connection;
  if (args.follow) {
    co.retries = 0;  // a lost server is retried below, forever and said so, not by the client for a few seconds
  }
  auto connected = net::client::connect(co);
  if (!connected) {
    return report(connected.error());
  }
  consume_run run(args, **connected, std::move(output));
  if (auto started = run.start(*from); !started) {
    return report(started.error());
  }
  return run.run();
}

}  // namespace rill::cli
