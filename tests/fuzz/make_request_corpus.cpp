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
#include "tests/fuzz/seed_writer.h"

using namespace rill;

namespace {
std::vector<std::byte> all;  // every frame, back to back

void put(fuzz::seed_writer& seeds, const std::vector<std::byte>& bytes) {
  seeds.put(bytes);
  all.insert(all.end(), bytes.begin(), bytes.end());
}

void request(fuzz::seed_writer& seeds, net::api a, const google::protobuf::MessageLite& header,
             std::span<const std::byte> batches = {}) {
  std::vector<std::byte> frame;
  net::append_request(frame, static_cast<std::uint32_t>(seeds.written()), a, header, batches);
  put(seeds, frame);
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
  fuzz::seed_writer seeds(argv[1], "request");
  request(seeds, net::api::ping, proto::PingRequest{});
  {
    proto::StreamCreateRequest r;
    r.set_name("fresh");
    request(seeds, net::api::stream_create, r);
  }
  {
    proto::TopicCreateRequest r;
    name(r.mutable_stream(), "orders");
    r.set_name("new");
    r.mutable_config()->set_partitions(3);
    request(seeds, net::api::topic_create, r);
  }
  {
    proto::TopicGetRequest r;
    name(r.mutable_stream(), "orders");
    name(r.mutable_topic(), "eu");
    request(seeds, net::api::topic_get, r);
  }
  {
    proto::PartitionsAddRequest r;
    name(r.mutable_stream(), "orders");
    name(r.mutable_topic(), "eu");
    r.set_count(2);
    request(seeds, net::api::partitions_add, r);
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
    request(seeds, net::api::produce, r, batch);
  }
  {
    proto::PollRequest r;
    name(r.mutable_stream(), "orders");
    name(r.mutable_topic(), "eu");
    r.set_partition_id(2);
    r.mutable_consumer()->set_name("app");
    r.set_max_records(10);
    request(seeds, net::api::poll, r);
  }
  {
    proto::OffsetStoreRequest r;
    name(r.mutable_stream(), "orders");
    name(r.mutable_topic(), "eu");
    r.mutable_consumer()->set_name("app");
    r.set_offset(5);
    request(seeds, net::api::offset_store, r);
  }
  {
    proto::GroupJoinRequest r;
    name(r.mutable_stream(), "orders");
    name(r.mutable_topic(), "eu");
    name(r.mutable_group(), "billing");
    request(seeds, net::api::group_join, r);
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
    request(seeds, net::api::group_commit, r);
  }
  seeds.put(all);  // every frame above, back to back
  std::printf("wrote %d seeds to %s\n", seeds.written(), seeds.dir().c_str());
  return 0;
}
