// libFuzzer target: what a client's bytes go through before any actor acts on them.
//
// The input is a byte stream as a connection reads it: frames are cut from it with next_frame_size (the connection's
// frame limit), each parsed with parse_request and routed by route_request against a small catalogue (stream 3
// 'orders', topic 5 'eu' with 4 partitions and group 7 'billing', topic 6 'us'); a decision for the metadata actor
// goes through plan_read or plan_change, one for a group through decide_group_request on a live group, a produce's
// batches through the producer validator. A frame the stream cannot size ends the input, as it closes a connection.
// Nothing may crash, hang, read out of bounds or allocate beyond the limits; and a reply is encoded for every error.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "actors/group_handlers.h"
#include "actors/metadata_handlers.h"
#include "actors/request_router.h"
#include "base/assert.h"
#include "base/clock.h"
#include "config/log_config.h"
#include "net/frame.h"
#include "storage/record_batch.h"
#include "tests/actors/orders_catalogue.h"

using namespace rill;
using namespace rill::actors;

namespace {

struct every_actor final : actor_directory {
  bool has_partition(std::uint32_t, std::uint32_t, std::uint32_t) const override { return true; }
  bool has_group(std::uint32_t, std::uint32_t, std::uint32_t) const override { return true; }
};

metadata_view make_view() {
  return testing::orders_catalogue();
}

group_identity make_group() {
  group_identity id;
  id.stream_id = 3;
  id.topic_id = 5;
  id.group_id = 7;
  id.name = "billing";
  id.config.set_strategy(proto::ASSIGNMENT_RANGE);
  id.config.set_session_timeout_ms(10'000);
  id.partitions = 4;
  id.dir = "/nonexistent/groups/3/5/7";
  return id;
}

// The connection's frame limit in the fuzzer: small enough that a fuzzed length prefix cannot ask for much.
constexpr std::uint64_t frame_bytes_max = 1 << 20;

const group_identity& group() {
  static const group_identity id = make_group();
  return id;
}

// What one connection's requests change, made fresh for every input so that one input never changes how the next
// one runs (a crash then reproduces from its input alone).
struct connection {
  group_state state = fresh_group_state(group());
  std::uint32_t balanced = 0;
};

void route_one(const net::request_view& req, std::uint64_t conn, connection& c) {
  static const metadata_view view = make_view();
  static const every_actor actors;
  static manual_clock clk;
  group_state& state = c.state;

  const route_decision d = route_request(req, view, actors, c.balanced, clk);
  if (const auto* to_meta = std::get_if<to_metadata>(&d)) {
    if (auto plan = plan_read(view, to_meta->api, to_meta->header)) {
      (void)build_reply(std::move(*plan), {});
    }
    (void)plan_change(view, to_meta->api, to_meta->header, config::log_config{}, config::resource_limits{});
  } else if (const auto* to_grp = std::get_if<to_group>(&d)) {
    const group_state::time_point now{static_cast<std::int64_t>(conn + 1) * 1'000'000'000};
    (void)decide_group_request(state, group(), to_grp->api, to_grp->header, now, conn);
    state.check_invariants();
  } else if (const auto* to_part = std::get_if<to_partition>(&d)) {
    if (const auto* produce = std::get_if<produce_call>(&to_part->call)) {
      // The router validated every batch (validated_batches): what the partition and the log then rely on holds.
      const auto& v = *produce->batches;
      v.check_invariants();
      for (const auto& b : v.batches()) {
        const auto header = storage::batch_view::trusted(v.bytes().subspan(b.position, b.size));
        RILL_ASSERT(header.producer_id() == b.producer_id);
        RILL_ASSERT(header.records_count() == static_cast<std::int32_t>(b.records));
        if (b.producer_id >= 0) {
          RILL_ASSERT(b.producer_epoch >= 0);
          RILL_ASSERT(b.base_sequence >= 0);
        } else {
          RILL_ASSERT(b.producer_id == -1);
          RILL_ASSERT(b.producer_epoch == -1);
          RILL_ASSERT(b.base_sequence == -1);
        }
      }
    }
  } else if (const auto* err = std::get_if<reply_error>(&d)) {
    proto::ErrorReply e;
    e.set_message(err->message);
    std::vector<std::byte> out;
    net::append_reply(out, req.correlation_id, err->st, e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);  // a fuzzed string field that is not UTF-8 is refused, not logged
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::byte> buffered(reinterpret_cast<const std::byte*>(data), size);
  connection c;
  for (std::uint64_t conn = 0; conn < 64 && !buffered.empty(); ++conn) {
    auto frame_size = net::next_frame_size(buffered, net::request_prefix_bytes, frame_bytes_max);
    if (!frame_size || !*frame_size) {
      return 0;  // refused (the connection closes) or incomplete (it waits for more)
    }
    const auto frame = buffered.first(**frame_size);
    buffered = buffered.subspan(**frame_size);
    auto req = net::parse_request(frame);
    if (!req) {
      return 0;
    }
    route_one(*req, conn, c);
  }
  return 0;
}
