// request_router: the decisions the connection actor used to make inline, in the same order and with the same
// messages.
#include "actors/request_router.h"

#include <limits>

#include <fmt/core.h>

#include "actors/reply_encoding.h"
#include "base/assert.h"
#include "config/limits.h"

namespace rill::actors {
namespace {

template <class M>
bool parse_header(const net::request_view& req, M& m) {
  return m.ParseFromArray(req.header.data(), static_cast<int>(req.header.size()));
}

std::string header_string(const net::request_view& req) {
  return std::string(reinterpret_cast<const char*>(req.header.data()), req.header.size());
}

reply_error error_of(const rill::error& e) {
  return reply_error{net::status_of(e.code()), e.detail()};
}

rill::unexpected fail(net::status st, std::string message) {
  return rill::unexpected(make_error_code(st), std::move(message));
}

reply_error bad_header() {
  return reply_error{net::status::bad_header, "the request header does not parse"};
}

struct stream_topic {
  const stream_meta* stream = nullptr;
  const topic_meta* topic = nullptr;
};

// One request's names resolved against the view; an error is the reply that ends the request.
class resolver {
 public:
  resolver(const metadata_view& view, const actor_directory& actors, std::uint32_t& balanced_next)
      : view_(view), actors_(actors), balanced_next_(balanced_next) {}

  // The topic, when this node serves what is asked of it: its consumer groups (`partitions` false), or its
  // partitions (a replicated topic's are placed one by one: partition() checks). Else not_primary, naming the node.
  expected<stream_topic> find(const proto::Identifier& s, const proto::Identifier& t, bool partitions = false) const {
    RILL_TRY(stream, view_.find_stream(s));
    RILL_TRY(topic, view_.find_topic(*stream, t));
    if (partitions && topic->config.replication_factor() > 1) {
      return stream_topic{stream, topic};
    }
    if (const std::uint64_t node = actors_.served_by(stream->id, topic->id); node != 0) {
      return redirect(node, fmt::format("topic '{}' of stream '{}'", topic->name, stream->name));
    }
    return stream_topic{stream, topic};
  }

  // not_primary: `what` is served by `node` (its client address, when the metadata knows it, goes to the client).
  rill::unexpected redirect(std::uint64_t node, const std::string& what) const {
    auto known = view_.nodes.find(node);
    redirect_ = known == view_.nodes.end() ? std::string() : known->second;
    return fail(
        net::status::not_primary,
        redirect_.empty()
            ? fmt::format("{} is served by node {}, whose client address is not known yet; retry shortly", what, node)
            : fmt::format("{} is served by node {} at {}", what, node, redirect_));
  }

  // Where a not_primary error sends the client (empty: unknown).
  [[nodiscard]] const std::string& redirect() const noexcept { return redirect_; }

  // The partition a request goes to: `partition`, or the next in round-robin order when it names none.
  expected<partition_key> partition(const proto::Identifier& s, const proto::Identifier& t,
                                    std::optional<std::uint32_t> partition) {
    RILL_TRY(found, find(s, t, true));
    const std::uint32_t count = found.topic->config.partitions();
    RILL_ASSERT(count > 0, "topic '{}' has no partitions", found.topic->name);
    std::uint32_t chosen = partition ? *partition : balanced_next_++ % count;
    if (!partition && found.topic->config.replication_factor() > 1) {
      // A replicated topic: round robin over the partitions this node leads, if any (else any: not_primary then
      // sends the client to a node that leads some).
      if (const auto* led = actors_.led(found.stream->id, found.topic->id); led != nullptr && !led->empty()) {
        chosen = (*led)[chosen % led->size()];
      }
    }
    if (chosen >= count) {
      return fail(net::status::partition_not_found, fmt::format("partition {} not found in topic '{}' ({} partitions)",
                                                                chosen, found.topic->name, count));
    }
    // A replicated partition with no replica here (placement is computed only then, off the common path).
    if (const std::uint32_t factor = found.topic->config.replication_factor();
        factor > 1 && !actors_.has_partition(found.stream->id, found.topic->id, chosen)) {
      if (const std::uint64_t node = actors_.partition_served_by(found.stream->id, found.topic->id, chosen, factor);
          node != 0) {
        return redirect(node, fmt::format("partition {} of topic '{}' of stream '{}' (replicated on {} nodes; this "
                                          "node holds no replica)",
                                          chosen, found.topic->name, found.stream->name, factor));
      }
    }
    if (!actors_.has_partition(found.stream->id, found.topic->id, chosen)) {
      return fail(net::status::unavailable, "the partition is being created or deleted; retry");
    }
    return partition_key{found.stream->id, found.topic->id, chosen};
  }

  // The largest batch the topic takes (its max_message_bytes; a view without one: the absolute limit, and the
  // partition's log checks its own). Call after partition() found the topic.
  std::uint64_t batch_bytes_max(const proto::Identifier& s, const proto::Identifier& t) const {
    auto found = find(s, t, true);
    RILL_ASSERT(found.has_value(), "the topic was found a moment ago");
    const auto& c = found->topic->config;
    return c.has_max_message_bytes() ? c.max_message_bytes() : limits::batch_bytes_limit;
  }

  expected<group_route> group(const proto::Identifier& s, const proto::Identifier& t,
                              const proto::Identifier& g) const {
    RILL_TRY(stream, view_.find_stream(s));
    RILL_TRY(topic, view_.find_topic(*stream, t));
    if (topic->config.replication_factor() > 1) {
      // A replicated topic's group: its coordinator group has a replica on every node, so any node takes it.
      RILL_TRY(group, metadata_view::find_group(*topic, g));
      return group_route{stream->id, topic->id, group->id, true};
    }
    RILL_TRY(found, find(s, t));
    RILL_TRY(group, metadata_view::find_group(*found.topic, g));
    if (!actors_.has_group(found.stream->id, found.topic->id, group->id)) {
      return fail(net::status::unavailable, "the group is being created or deleted; retry");
    }
    return group_route{found.stream->id, found.topic->id, group->id};
  }

  expected<group_route> group_named(const proto::Identifier& s, const proto::Identifier& t,
                                    const std::string& name) const {
    proto::Identifier g;
    g.set_name(name);
    return group(s, t, g);
  }

 private:
  const metadata_view& view_;
  const actor_directory& actors_;
  std::uint32_t& balanced_next_;
  mutable std::string redirect_;
};

route_decision to_group_of(expected<group_route> group, net::api a, const net::request_view& req) {
  if (!group) {
    return error_of(group.error());
  }
  const bool tracks = a == net::api::group_join || a == net::api::group_heartbeat;
  return to_group{*group, req.api_wire, header_string(req), tracks};
}

route_decision produce(const net::request_view& req, resolver& r) {
  proto::ProduceRequest h;
  if (!parse_header(req, h)) {
    return bad_header();
  }
  if (req.batches.empty()) {
    return reply_error{net::status::invalid_batch, "a produce request carries at least one batch"};
  }
  std::optional<std::uint32_t> partition;
  if (h.partitioning().kind_case() == proto::Partitioning::kPartitionId) {
    partition = h.partitioning().partition_id();
  }
  auto target = r.partition(h.stream(), h.topic(), partition);
  if (!target) {
    return error_of(target.error());
  }
  // Validated in place (the connection's receive buffer), then copied once. The log checks its own size limit again
  // (cheap): the topic's configuration may have changed since this view.
  auto validated = storage::validated_batches::validate(req.batches, r.batch_bytes_max(h.stream(), h.topic()));
  if (!validated) {
    return error_of(validated.error());
  }
  return to_partition{*target, produce_call{std::make_shared<storage::validated_batches>(std::move(*validated))}};
}

route_decision poll(const net::request_view& req, resolver& r) {
  proto::PollRequest h;
  if (!parse_header(req, h)) {
    return bad_header();
  }
  auto target = r.partition(h.stream(), h.topic(), h.partition_id());
  if (!target) {
    return error_of(target.error());
  }
  // Offsets are below 2^63 (Kafka's are signed): a larger one is past every log, said in the client's own number.
  if (h.strategy().kind() == proto::PollStrategy::OFFSET &&
      h.strategy().value() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return reply_error{net::status::offset_out_of_range,
                       fmt::format("offset {} is beyond the log end (offsets are below 2^63)", h.strategy().value())};
  }
  // A group member's poll goes through its group, which checks ownership and knows the group's offset.
  std::optional<group_route> group;
  if (h.consumer().kind_case() == proto::Consumer::kGroup) {
    auto g = r.group_named(h.stream(), h.topic(), h.consumer().group());
    if (!g) {
      return error_of(g.error());
    }
    group = *g;
  }
  return to_partition{*target, poll_call{std::move(h), group}};
}

route_decision offset(const net::request_view& req, net::api a, resolver& r) {
  const bool store = a == net::api::offset_store;
  proto::OffsetStoreRequest h;  // OffsetGetRequest has the same first four fields
  if (!parse_header(req, h)) {
    return bad_header();
  }
  if (h.consumer().kind_case() == proto::Consumer::kGroup) {
    return to_group_of(r.group_named(h.stream(), h.topic(), h.consumer().group()), a, req);
  }
  if (h.consumer().kind_case() != proto::Consumer::kName) {
    return reply_error{net::status::bad_header, "an offset request names a consumer or a group"};
  }
  auto target = r.partition(h.stream(), h.topic(), h.partition_id());
  if (!target) {
    return error_of(target.error());
  }
  return to_partition{*target, offset_call{store, h.consumer().name(), static_cast<std::int64_t>(h.offset())}};
}

route_decision route_with(const net::request_view& req, net::api api, resolver& r, const clock& clk,
                          net::metadata_position at) {
  switch (api) {
    case net::api::ping:
      return reply_frame{ping_reply_frame(req.correlation_id, clk.wall_ms(), at)};
    case net::api::login:
      return reply_error{net::status::unsupported, "authentication arrives with a later version; no login is needed"};
    case net::api::produce:
      return produce(req, r);
    case net::api::poll:
      return poll(req, r);
    case net::api::offset_store:
    case net::api::offset_get:
      return offset(req, api, r);
    case net::api::group_get:
    case net::api::group_join:
    case net::api::group_leave:
    case net::api::group_heartbeat:
    case net::api::group_assignment:
    case net::api::group_commit:
    case net::api::group_offsets: {
      proto::GroupGetRequest h;  // every group request starts with stream, topic and group
      if (!parse_header(req, h)) {
        return bad_header();
      }
      return to_group_of(r.group(h.stream(), h.topic(), h.group()), api, req);
    }
    default:
      // Streams, topics, partitions, stats, and creating, listing and deleting groups: the metadata actor.
      return to_metadata{req.api_wire, header_string(req), api == net::api::stats};
  }
}

}  // namespace

route_decision route_request(const net::request_view& req, const metadata_view& view, const actor_directory& actors,
                             std::uint32_t& balanced_next, const clock& clk, net::metadata_position at) {
  const auto a = net::api_from_wire(req.api_wire);
  if (!a) {
    return reply_error{net::status::unknown_api, fmt::format("api {} does not exist", req.api_wire)};
  }
  if (req.version != net::protocol_version) {
    return reply_error{net::status::unsupported_version,
                       fmt::format("protocol version {} (this server speaks {})", req.version, net::protocol_version)};
  }
  resolver r(view, actors, balanced_next);
  auto decision = route_with(req, *a, r, clk, at);
  if (auto* e = std::get_if<reply_error>(&decision); e != nullptr && e->st == net::status::not_primary) {
    e->primary_address = r.redirect();
  }
  return decision;
}

}  // namespace rill::actors
