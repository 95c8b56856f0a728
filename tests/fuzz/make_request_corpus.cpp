// Writes the seed corpus for request_decoder_fuzz: request frames of every API family that the fuzzer's catalogue
// knows (stream 'orders', topic 'eu', group 'billing'), one per file, and one file with several frames back to back
// as a connection reads them.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "net/frame.h"
#include "net/proto/rill.pb.h"
#include "storage/record_batch_builder.h"

using namespace rill;

namespace {
int written = 0;
std::vector<std::byte> all;

void put(const std::string& dir, const std::vector<std::byte>& bytes) {
  const std::string path = dir + "/request-" + std::to_string(written++);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  all.insert(all.end(), bytes.begin(), bytes.end());
}

void request(const std::string& dir, net::api a, const google::protobuf::MessageLite& header,
             std::span<const std::byte> batches = {}) {
  std::vector<std::byte> frame;
  net::append_request(frame, static_cast<std::uint32_t>(written), a, header, batches);
  put(dir, frame);
}

void name(proto::Identifier* id, const std::string& n) {
  id->set_name(n);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_request_corpus DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  request(dir, net::api::ping, proto::PingRequest{});
  {
    proto::StreamCreateRequest r;
    r.set_name("fresh");
    request(dir, net::api::stream_create, r);
  }
  {
    proto::TopicCreateRequest r;
    name(r.mutable_stream(), "orders");
    r.set_name("new");
    r.mutable_config()->set_partitions(3);
    request(dir, net::api::topic_create, r);
  }
  {
    proto::TopicGetRequest r;
    name(r.mutable_stream(), "orders");
    name(r.mutable_topic(), "eu");
    request(dir, net::api::topic_get, r);
  }
  {
    proto::PartitionsAddRequest r;
    name(r.mutable_stream(), "orders");
    name(r.mutable_topic(), "eu");
    r.set_count(2);
    request(dir, net::api::partitions_add, r);
  }
  {
    storage::batch_builder b(storage::compression::none);
    b.producer(7, 0, 0).base_timestamp(timestamp_ms_t(1000));
    b.add("k", "value");
    const auto batch = *b.build();
    proto::ProduceRequest r;
    name(r.mutable_stream(), "orders");
    name(r.mutable_topic(), "eu");
    r.mutable_partitioning()->set_partition_id(1);
    request(dir, net::api::produce, r, batch);
  }
  {
    proto::PollRequest r;
    name(r.mutable_stream(), "orders");
    name(r.mutable_topic(), "eu");
    r.set_partition_id(2);
    r.mutable_consumer()->set_name("app");
    r.set_max_records(10);
    request(dir, net::api::poll, r);
  }
  {
    proto::OffsetStoreRequest r;
    name(r.mutable_stream(), "orders");
    name(r.mutable_topic(), "eu");
    r.mutable_consumer()->set_name("app");
    r.set_offset(5);
    request(dir, net::api::offset_store, r);
  }
  {
    proto::GroupJoinRequest r;
    name(r.mutable_stream(), "orders");
    name(r.mutable_topic(), "eu");
    name(r.mutable_group(), "billing");
    request(dir, net::api::group_join, r);
  }
  {
    proto::GroupCommitRequest r;
    name(r.mutable_stream(), "orders");
    name(r.mutable_topic(), "eu");
    name(r.mutable_group(), "billing");
    r.mutable_member()->set_member_id("member-1");
    auto* o = r.add_offsets();
    o->set_partition_id(1);
    o->set_offset(3);
    request(dir, net::api::group_commit, r);
  }
  put(dir, std::vector<std::byte>(all));  // every frame above, back to back
  std::printf("wrote %d seeds to %s\n", written, dir.c_str());
  return 0;
}
