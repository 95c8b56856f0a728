#pragma once
// The C++ client library.
//
// client: one connection to a rilld, synchronous calls (one request at a time per client; use one client per
// thread). A call that fails with a retriable status (overloaded, unavailable, timeout) or a dropped connection is
// retried after a backoff, reconnecting as needed, up to `retries` times. Produces are idempotent (producer id,
// epoch and per-partition sequence in the batch header), so such a retry never duplicates a message.
//
// producer: batching (a batch per partition, sent at max_batch_records / max_batch_bytes or after `linger`), zstd
// compression, partitioning (explicit partition, Kafka's murmur2 of the key, or round robin), idempotence.
// Sequences wrap from INT32_MAX to 0 as Kafka's do. A partition that answers unknown_producer_id (it no longer
// knows the producer: its batches were removed, or lie in segments older than the ones a restart rebuilds from) has
// written nothing of the batch; the producer then starts a new producer id (sequence 0 on every partition) and
// sends the batch again, so the caller sees no error.
//
// consumer: polls one partition from a strategy, with the server storing its offset (auto_commit) when named.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"
#include "net/frame.h"
#include "net/proto/rill.pb.h"
#include "storage/record_batch.h"
#include "storage/record_batch_builder.h"

namespace rill::net {

// A reply not_primary names the node that serves the request: the client connects there and sends it again, at
// most this many times per try (a try that fails, at a node that cannot be reached, is retried after its backoff). It
// remembers the node for the topic, or for the partition when the request names one (a replicated topic's partitions
// are led by different nodes) (a hint: at most topic_routes_max entries) and sends that topic's next requests there
// directly, keeping its connections to the other nodes open (at most connections_max of them) so that a client working
// with topics on several nodes does not reconnect each time.
inline constexpr int redirects_max = 3;
inline constexpr std::size_t topic_routes_max = 4096;
inline constexpr std::size_t connections_max = 16;

struct client_options {
  // One server "HOST:PORT" or a list "a:9420,b:9420": a connection goes to the first that accepts, starting from the
  // one that answered last.
  std::string server = "127.0.0.1:9420";
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds request_timeout{60'000};
  // A server that has taken nothing more of the request or sent nothing more of its reply for liveness_probe_after
  // is asked over a new connection whether it is alive (a ping; the connection and the reply each within
  // liveness_probe_timeout), again after each further liveness_probe_after of silence. One that is not (a paused or
  // hung process: its kernel still accepts connections and acknowledges bytes; a node still recovering at start)
  // fails the try as a timeout, so the call goes on to another server at once instead of waiting out
  // request_timeout; one that answers (a reply, an error status, or a close at its connection limit) is waited for
  // (a long poll, a slow disk). Only where there is another server to go to (the list names several, or the
  // current one came from a redirect) and a try is left; else the try waits out request_timeout. The request the
  // silent server holds may still run once it resumes, as after any timeout. 0 (either): never ask.
  std::chrono::milliseconds liveness_probe_after{5'000};
  std::chrono::milliseconds liveness_probe_timeout{2'000};
  int retries = 8;
  // A call ends within this, its tries, redirects and backoffs together (as Kafka's default.api.timeout.ms bounds an
  // admin call): the last try's request_timeout is cut to what is left, and no try starts once it is spent. It
  // bounds how long a caller waits for a node that accepts connections but never answers.
  std::chrono::milliseconds call_timeout{120'000};
  std::chrono::milliseconds retry_backoff{100};  // doubled per attempt, up to 2 s
  std::uint64_t max_frame_bytes = 64 * 1024 * 1024;
};

struct reply {
  status st = status::ok;
  std::string header;              // serialized reply header
  std::vector<std::byte> batches;  // record batches that followed it
};

proto::Identifier by_name(const std::string& name);
proto::Identifier by_id(std::uint32_t id);

class client {
 public:
  static expected<std::unique_ptr<client>> connect(client_options options);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // One request and its reply, with retries for retriable failures. A non-ok status is returned as an error whose
  // code is the status and whose detail is the server's message.
  expected<reply> call(api a, const google::protobuf::MessageLite& header, std::span<const std::byte> batches = {});

  // The server of the list this client is (or was last) connected to.
  [[nodiscard]] const std::string& server() const noexcept { return current_server_; }

  expected<proto::PingReply> ping();
  expected<proto::StatsReply> stats();
  // What this node knows of the cluster: its replica of the metadata group and its links to its peers.
  expected<proto::ClusterStatusReply> cluster_status();
  expected<proto::StreamInfo> create_stream(const std::string& name);
  expected<std::vector<proto::StreamInfo>> list_streams();
  expected<proto::StreamGetReply> get_stream(const proto::Identifier& stream);
  expected<void> delete_stream(const proto::Identifier& stream);
  expected<proto::TopicInfo> create_topic(const proto::Identifier& stream, const std::string& name,
                                          const proto::TopicConfig& config);
  expected<proto::TopicInfo> get_topic(const proto::Identifier& stream, const proto::Identifier& topic);
  expected<std::vector<proto::TopicInfo>> list_topics(const proto::Identifier& stream);
  expected<void> delete_topic(const proto::Identifier& stream, const proto::Identifier& topic);
  expected<proto::StreamInfo> update_stream(const proto::Identifier& stream, const std::string& new_name);
  // Changes the fields `config` sets (and the name, if given); when its storage settings change, the topic's
  // partitions reopen with them.
  expected<proto::TopicInfo> update_topic(const proto::Identifier& stream, const proto::Identifier& topic,
                                          const proto::TopicConfig& config,
                                          std::optional<std::string> new_name = std::nullopt);
  expected<proto::TopicInfo> add_partitions(const proto::Identifier& stream, const proto::Identifier& topic,
                                            std::uint32_t count);
  // Deletes the `count` highest-numbered partitions and their data.
  expected<proto::TopicInfo> delete_partitions(const proto::Identifier& stream, const proto::Identifier& topic,
                                               std::uint32_t count);
  expected<proto::ProduceReply> produce(const proto::Identifier& stream, const proto::Identifier& topic,
                                        std::optional<std::uint32_t> partition, std::span<const std::byte> batches);
  struct poll_result {
    proto::PollReply header;
    std::vector<std::byte> batches;
  };
  expected<poll_result> poll(const proto::PollRequest& request);
  expected<std::optional<std::uint64_t>> get_offset(const proto::Identifier& stream, const proto::Identifier& topic,
                                                    std::uint32_t partition, const std::string& consumer);
  expected<std::optional<std::uint64_t>> store_offset(const proto::Identifier& stream, const proto::Identifier& topic,
                                                      std::uint32_t partition, const std::string& consumer,
                                                      std::uint64_t offset);

  // Consumer groups (net/client_groups.cpp; docs/consumer-groups.md).
  expected<proto::GroupInfo> create_group(const proto::Identifier& stream, const proto::Identifier& topic,
                                          const std::string& name, const proto::GroupConfig& config = {});
  expected<proto::GroupInfo> get_group(const proto::Identifier& stream, const proto::Identifier& topic,
                                       const proto::Identifier& group);
  expected<std::vector<proto::GroupInfo>> list_groups(const proto::Identifier& stream, const proto::Identifier& topic);
  expected<void> delete_group(const proto::Identifier& stream, const proto::Identifier& topic,
                              const proto::Identifier& group);
  // Without member_id the server makes one; with one the client joins (or rejoins) as that member.
  expected<proto::GroupJoinReply> join_group(const proto::Identifier& stream, const proto::Identifier& topic,
                                             const proto::Identifier& group,
                                             const std::optional<std::string>& member_id = std::nullopt);
  expected<void> leave_group(const proto::Identifier& stream, const proto::Identifier& topic,
                             const proto::Identifier& group, const std::string& member_id);
  // Renews the session, hands back `released` (partitions being revoked that the member stopped reading).
  expected<proto::GroupAssignment> heartbeat_group(const proto::Identifier& stream, const proto::Identifier& topic,
                                                   const proto::Identifier& group, const std::string& member_id,
                                                   std::span<const std::uint32_t> released = {});
  // The member's assignment, without renewing its session.
  expected<proto::GroupAssignment> group_assignment(const proto::Identifier& stream, const proto::Identifier& topic,
                                                    const proto::Identifier& group, const std::string& member_id);
  // Commits next offsets to consume (partition, offset) for the member, all or none.
  expected<void> commit_group(const proto::Identifier& stream, const proto::Identifier& topic,
                              const proto::Identifier& group, const proto::GroupMember& member,
                              const std::vector<std::pair<std::uint32_t, std::uint64_t>>& offsets);
  expected<std::vector<proto::GroupPartition>> group_offsets(const proto::Identifier& stream,
                                                             const proto::Identifier& topic,
                                                             const proto::Identifier& group);

  [[nodiscard]] const client_options& options() const noexcept { return options_; }

  // Read your writes across nodes (docs/protocol.md): the highest metadata position the replies of this client
  // named, sent with every request so that whichever node serves it has applied at least what this client saw
  // (a topic it created through one node is found by a produce through another). observe() adds a position another
  // client saw (a handle passed between processes, for example), so this one's requests wait for it too.
  [[nodiscard]] metadata_position seen() const noexcept { return seen_; }
  void observe(metadata_position at) noexcept;
  // Connections this client has made (to any node), since it was created.
  [[nodiscard]] std::uint64_t connects() const noexcept { return connects_; }
  // not_primary replies this client followed (each topic's first, and each after its node changed).
  [[nodiscard]] std::uint64_t redirects() const noexcept { return redirects_; }
  // Liveness pings sent to a server silent for liveness_probe_after, and those it did not answer.
  [[nodiscard]] std::uint64_t liveness_probes() const noexcept { return liveness_probes_; }
  [[nodiscard]] std::uint64_t liveness_probes_failed() const noexcept { return liveness_probes_failed_; }

 private:
  explicit client(client_options o) : options_(std::move(o)) {}
  expected<void> reconnect();
  expected<void> connect_one(const std::string& server);
  // Sends `head` and then `batches` (one frame: append_request_head) and reads the reply, by request_timeout or
  // call_deadline, whichever comes first. leave_if_silent: a server
  // silent for liveness_probe_after that fails the liveness ping ends the try early (there is another server to go
  // to and a try left); otherwise the try waits out request_timeout.
  expected<reply> call_once(api a, std::span<const std::byte> head, std::span<const std::byte> batches,
                            bool leave_if_silent, std::chrono::steady_clock::time_point call_deadline);
  void disconnect();
  // Waits until the connection is ready for `events` or `deadline` passes (false). With leave_if_silent it asks a
  // silent server whether it is alive every liveness_probe_after: one that does not answer ends the wait early,
  // with `*dead` set.
  bool wait_server(short events, std::chrono::steady_clock::time_point deadline, bool leave_if_silent, bool* dead);
  // One ping over a new connection to the current server (the connection and the reply each within
  // liveness_probe_timeout): false if it could not connect or got no reply in time.
  bool server_answers();
  // Makes `server` the current connection: the one held for it if any, else a new one; the current one is held for
  // later (the oldest held is closed past connections_max).
  expected<void> switch_to(const std::string& server);

  client_options options_;
  std::size_t server_index_ = 0;  // in options_.server's list: the one connected (or tried first next time)
  std::string current_server_;
  // The server whose request just timed out or whose connection closed: the next reconnect tries it last (a node
  // that accepts connections but cannot answer, paused or cut off from its peers, is not asked again and again).
  std::string avoid_;
  int fd_ = -1;
  // Kept between calls so that a reply costs no allocation or zero-fill: the request's head, and the receive buffer
  // (received bytes are in_[0, n) of one call; its size only grows, up to in_kept_bytes_max between calls).
  std::vector<std::byte> head_;
  std::vector<std::byte> in_;
  static constexpr std::size_t in_kept_bytes_max = 1 << 20;
  std::uint32_t next_correlation_ = 1;
  metadata_position seen_;
  std::uint64_t connects_ = 0;
  std::uint64_t redirects_ = 0;
  std::uint64_t liveness_probes_ = 0;
  std::uint64_t liveness_probes_failed_ = 0;
  std::vector<std::pair<std::string, int>> held_;  // open connections to other nodes, oldest first
  std::map<std::string, std::string> routes_;      // topic (its request's stream and topic fields) -> node address
};

// A message to produce.
struct message {
  std::optional<std::string> key;
  std::optional<std::string> value;  // nullopt with a key: a tombstone
  std::vector<std::pair<std::string, std::optional<std::string>>> headers;
  std::optional<std::uint32_t> partition;  // explicit partition; otherwise the key's, or round robin
};

struct producer_options {
  std::uint32_t max_batch_records = 1000;
  // A batch is sent before a message would take it past this (or past the topic's max_message_bytes, whichever is
  // lower); a single message larger than that goes alone (and the server names the limit it breaks).
  std::uint64_t max_batch_bytes = 1024 * 1024;
  std::chrono::milliseconds linger{5};
  bool zstd = false;
  bool idempotent = true;
};

class producer {
 public:
  // Looks the topic up (partition count) on `c`, which must outlive the producer.
  static expected<std::unique_ptr<producer>> create(client& c, proto::Identifier stream, proto::Identifier topic,
                                                    producer_options options = {});

  struct ack {
    std::uint32_t partition = 0;
    std::uint64_t offset = 0;
  };
  // Queues a message; sends its partition's batch when it is full (or older than linger). Returns the acks of every
  // batch sent by this call.
  expected<std::vector<ack>> send(const message& m);
  // Sends every queued batch; returns their acks, in the order the messages were given per partition.
  expected<std::vector<ack>> flush();
  [[nodiscard]] std::uint32_t partitions() const noexcept { return partitions_; }

 private:
  struct pending {
    std::vector<message> messages;
    std::uint64_t bytes = 0;
    std::chrono::steady_clock::time_point first;
  };
  producer(client& c, proto::Identifier s, proto::Identifier t, producer_options o, std::uint32_t partitions,
           std::uint64_t topic_batch_bytes_max);
  expected<std::vector<ack>> send_partition(std::uint32_t partition);
  // A fresh random producer id; every partition's sequence back to 0.
  void start_producer_id();

  // How often one send may start a new producer id after unknown_producer_id (a new id at sequence 0 is never
  // unknown, so once is enough; the bound keeps a misbehaving server from looping us).
  static constexpr int producer_id_restarts_max = 1;
  client& client_;
  proto::Identifier stream_;
  proto::Identifier topic_;
  producer_options options_;
  std::uint32_t partitions_;
  std::uint64_t batch_bytes_max_;  // the estimate of a batch's size (batch_bytes_of) kept at or below this
  std::uint32_t next_balanced_ = 0;
  // Reused by every send (reset, not reallocated): the batch being encoded, and its finished bytes.
  storage::batch_builder builder_;
  std::vector<std::byte> batch_;
  std::int64_t producer_id_;
  std::map<std::uint32_t, std::int32_t> sequences_;  // next sequence per partition
  std::map<std::uint32_t, pending> pending_;
};

// A received message.
struct record {
  std::uint32_t partition = 0;
  std::uint32_t subscription = 0;  // group_consumer: the index of the record's topic in its subscriptions
  std::uint64_t generation = 0;    // group_consumer: the group generation it was read under
  std::int64_t offset = 0;
  std::int64_t timestamp_ms = 0;
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::optional<std::string>>> headers;
};

// Visits every record of the batches of a poll reply without copying it: each batch is validated (CRC,
// structure) and a zstd one decompressed into `scratch`; `on` gets the batch and the record (which points into the
// reply or `scratch`, valid during the call). The first error (a bad batch or record, or one `on` returns) ends it.
using record_visitor =
    std::function<expected<void>(const storage::batch_view& batch, const storage::record_view& record)>;
expected<void> for_each_record(std::span<const std::byte> batches, std::vector<std::byte>& scratch,
                               const record_visitor& on);

// One record as a `record` (copied out of the batch).
expected<record> copy_record(std::uint32_t partition, const storage::batch_view& batch, const storage::record_view& r);

// Decodes every record of the batches of a poll reply (decompressing zstd), copying each.
expected<std::vector<record>> decode_records(std::uint32_t partition, std::span<const std::byte> batches);

struct consumer_options {
  std::optional<std::string> name;  // a named consumer: starts from, and stores, its offset on the server
  proto::PollStrategy::Kind start = proto::PollStrategy::NEXT;  // where to begin (NEXT: the stored offset)
  std::uint64_t start_value = 0;                                // OFFSET / TIMESTAMP
  std::uint32_t max_records = 1000;
  std::uint64_t max_bytes = 1024 * 1024;
  std::chrono::milliseconds max_wait{1000};  // a poll with nothing visible waits this long on the server
  bool from_replica = false;                 // a replicated partition: any replica answers with what it knows committed
};

// consumer: reads one partition in order from its start position. With a name, its position is stored on the
// server after the records next() returned (so a restarted consumer resumes after them).
class consumer {
 public:
  consumer(client& c, proto::Identifier stream, proto::Identifier topic, std::uint32_t partition,
           consumer_options options = {});
  // The next records (empty when none arrived within max_wait).
  expected<std::vector<record>> next();
  [[nodiscard]] std::optional<std::uint64_t> position() const noexcept { return position_; }

 private:
  client& client_;
  proto::Identifier stream_;
  proto::Identifier topic_;
  std::uint32_t partition_;
  consumer_options options_;
  std::optional<std::uint64_t> position_;  // the next offset to read, once known
};

}  // namespace rill::net
