#include "actors/metadata_actor.hpp"

#include <fmt/core.h>

#include "actors/runtime/shard.h"
#include "net/frame.h"
#include "net/proto/metadata.pb.h"
#include "storage/file_ops.h"

namespace rill::actors {
namespace {
using recovered_atom = caf::atom_constant<caf::atom("recovered")>;

rill::unexpected fail(net::status s, std::string message) {
  return rill::unexpected(make_error_code(s), std::move(message));
}

template <class M>
metadata_reply reply_with(const M& m) {
  metadata_reply r;
  r.header = m.SerializeAsString();
  return r;
}

void fill_stream(proto::StreamInfo& out, const stream_meta& s) {
  out.set_id(s.id);
  out.set_name(s.name);
  out.set_topics(static_cast<std::uint32_t>(s.topics.size()));
  out.set_created_ms(s.created_ms);
}

std::string streams_root(const std::string& data_dir) {
  return storage::join_path(data_dir, "streams");
}
}  // namespace

std::string partition_dir(const std::string& data_dir, std::uint32_t stream, std::uint32_t topic,
                          std::uint32_t partition) {
  return fmt::format("{}/{}/topics/{}/partitions/{}", streams_root(data_dir), stream, topic, partition);
}

metadata_actor::metadata_actor(caf::actor_config& cfg, const metadata_services* services)
    : metered<>(cfg, "metadata", 0), homed(0), services_(services) {
  set_metrics_name("metadata");
}

caf::behavior metadata_actor::make_behavior() {
  io_ = std::make_unique<actor_io>(this);
  rill::spawn(recover(), [this](expected<void> recovered) {
    ready_ = recovered.has_value();
    if (services_->on_ready) {
      services_->on_ready(ready_, recovered ? std::string() : recovered.error().message());
    }
    set_default_handler(caf::print_and_drop);
    caf::message_handler serving{
        [this](metadata_atom, metadata_msg& msg) -> caf::result<metadata_reply> {
          auto rp = make_response_promise<metadata_reply>();
          if (!ready_) {
            return metadata_reply{outcome{net::status::unavailable, "metadata recovery failed"}, {}};
          }
          const auto a = net::api_from_wire(msg.api);
          const bool is_read = a == net::api::stream_get || a == net::api::stream_list || a == net::api::topic_get ||
                               a == net::api::topic_list || a == net::api::stats || a == net::api::group_list;
          auto run = [this, rp, is_read, api = msg.api, header = std::move(msg.header)]() mutable {
            auto finished = [this, rp, is_read](expected<metadata_reply> reply) mutable {
              rp.deliver(reply ? std::move(*reply) : metadata_reply{outcome::of(reply.error()), {}});
              if (!is_read) {
                mutating_ = false;
                pump();
              }
            };
            if (is_read) {
              rill::spawn(read(api, std::move(header)), std::move(finished));
            } else {
              rill::spawn(mutate(api, std::move(header)), std::move(finished));
            }
          };
          if (is_read) {
            run();
          } else {
            mutations_.push_back(std::move(run));
            pump();
          }
          return rp;
        },
        [this](close_atom) -> caf::result<outcome> {
          auto rp = make_response_promise<outcome>();
          auto job = [](metadata_actor* self) -> task<expected<void>> {
            std::vector<std::uint64_t> all;
            for (const auto& [ns, a] : self->partitions_) {
              all.push_back(ns);
            }
            // Close (not destroy) every partition, then the metadata log.
            for (auto ns : all) {
              auto closed =
                  co_await actor_request<outcome, close_atom>(self, self->partitions_.at(ns), close_atom::value);
              (void)closed;
            }
            self->partitions_.clear();
            // Groups after partitions: their members' parked polls have been answered by now.
            std::vector<caf::actor> groups;  // copied: the map may change while we wait
            for (const auto& [ns, g] : self->groups_) {
              groups.push_back(g);
            }
            self->groups_.clear();
            for (const auto& g : groups) {
              (void)co_await actor_request<outcome, close_atom>(self, g, close_atom::value);
            }
            if (self->group_) {
              RILL_CO_TRY_VOID(co_await self->group_->close());
            }
            co_return expected<void>{};
          };
          rill::spawn(job(this), [this, rp](expected<void> closed) mutable {
            rp.deliver(closed ? outcome{} : outcome::of(closed.error()));
            quit();
          });
          return rp;
        },
    };
    become(caf::behavior{io_completion_handler(*io_).or_else(serving)});
  });
  set_default_handler(caf::skip);
  return io_completion_handler(*io_);
}

void metadata_actor::pump() {
  if (mutating_ || mutations_.empty()) {
    return;
  }
  mutating_ = true;
  auto next = std::move(mutations_.front());
  mutations_.pop_front();
  next();
}

void metadata_actor::publish() {
  auto table = std::make_shared<routing_table>();
  table->view = state_.view();
  table->partitions = partitions_;
  table->groups = groups_;
  services_->routes->publish(std::move(table));
}

void metadata_actor::spawn_partitions(std::uint32_t stream, std::uint32_t topic, std::uint32_t from, std::uint32_t to) {
  const auto view = state_.view();
  const topic_meta& t = view->streams.at(stream).topics.at(topic);
  storage::log_options options;
  options.config = log_config_for(t.config, services_->config->storage);
  for (std::uint32_t p = from; p < to; ++p) {
    const std::uint64_t ns = partition_namespace(stream, topic, p);
    partition_identity id{stream, topic, p, partition_dir(services_->config->data_dir, stream, topic, p)};
    partitions_[ns] =
        system().spawn<partition_actor>(shard_of(ns, services_->shards), id, options, services_->partitions);
  }
}

void metadata_actor::spawn_group(std::uint32_t stream, const topic_meta& topic, const group_meta& group) {
  const std::uint64_t ns = group_namespace(stream, topic.id, group.id);
  group_identity id{stream,
                    topic.id,
                    group.id,
                    group.name,
                    group.created_ms,
                    group.config,
                    topic.config.partitions(),
                    group_dir(services_->config->data_dir, stream, topic.id, group.id)};
  groups_[ns] = system().spawn<group_actor>(shard_of(ns, services_->shards), std::move(id), services_->groups);
}

task<expected<void>> metadata_actor::destroy_groups(std::vector<std::uint64_t> namespaces) {
  for (auto ns : namespaces) {
    auto it = groups_.find(ns);
    if (it == groups_.end()) {
      continue;
    }
    caf::actor g = it->second;
    groups_.erase(it);
    RILL_CO_TRY(r, co_await actor_request<outcome, destroy_atom>(this, g, destroy_atom::value));
    if (!r.ok()) {
      co_return fail(r.st, r.message);
    }
  }
  co_return expected<void>{};
}

void metadata_actor::resize_groups(std::uint32_t stream, const topic_meta& topic) {
  for (const auto& [gid, g] : topic.groups) {
    auto it = groups_.find(group_namespace(stream, topic.id, gid));
    if (it != groups_.end()) {
      anon_send(it->second, resize_atom::value, topic.config.partitions());
    }
  }
}

task<expected<void>> metadata_actor::recover() {
  const std::string dir = storage::join_path(services_->config->data_dir, "metadata");
  // A data directory of a build before the metadata VSR group kept a partition log here: refuse it, naming it,
  // rather than start empty beside it.
  if (auto old = co_await storage::list_dir(*io_, storage::join_path(dir, "log")); old) {
    co_return fail(net::status::storage_error,
                   dir +
                       "/log holds metadata in the format of an earlier build (a partition log); this build keeps "
                       "metadata in journal.wal. Recreate the data directory, or run the earlier build to export "
                       "its streams");
  }
  consensus::local_group_options options;
  options.journal.slot_count = services_->journal_slots;
  RILL_CO_TRY(group, co_await consensus::local_group::open(*io_, dir, machine_, options));
  group_ = std::move(group);
  // Partitions of every topic, on their shards; data of anything deleted before a crash could remove it goes.
  const auto view = state_.view();
  for (const auto& [sid, s] : view->streams) {
    for (const auto& [tid, t] : s.topics) {
      spawn_partitions(sid, tid, 0, t.config.partitions());
      for (const auto& [gid, g] : t.groups) {
        spawn_group(sid, t, g);
      }
    }
  }
  std::vector<std::string> orphans;
  // Group state of deleted streams, topics and groups: <data>/groups/<stream>/<topic>/<group>.
  const std::string groups_root = storage::join_path(services_->config->data_dir, "groups");
  if (auto streams = co_await storage::list_dir(*io_, groups_root)) {
    for (const auto& sname : *streams) {
      char* end = nullptr;
      const unsigned long sid = std::strtoul(sname.c_str(), &end, 10);
      auto sit = view->streams.find(static_cast<std::uint32_t>(sid));
      const std::string sdir = storage::join_path(groups_root, sname);
      if (*end != '\0' || sit == view->streams.end()) {
        orphans.push_back(sdir);
        continue;
      }
      auto topics = co_await storage::list_dir(*io_, sdir);
      for (const auto& tname : topics ? *topics : std::vector<std::string>{}) {
        const unsigned long tid = std::strtoul(tname.c_str(), &end, 10);
        auto tit = sit->second.topics.find(static_cast<std::uint32_t>(tid));
        const std::string tdir = storage::join_path(sdir, tname);
        if (*end != '\0' || tit == sit->second.topics.end()) {
          orphans.push_back(tdir);
          continue;
        }
        auto groups = co_await storage::list_dir(*io_, tdir);
        for (const auto& gname : groups ? *groups : std::vector<std::string>{}) {
          const unsigned long gid = std::strtoul(gname.c_str(), &end, 10);
          if (*end != '\0' || !tit->second.groups.contains(static_cast<std::uint32_t>(gid))) {
            orphans.push_back(storage::join_path(tdir, gname));
          }
        }
      }
    }
  }
  if (auto streams = co_await storage::list_dir(*io_, streams_root(services_->config->data_dir))) {
    for (const auto& name : *streams) {
      const std::string sdir = storage::join_path(streams_root(services_->config->data_dir), name);
      char* end = nullptr;
      const unsigned long sid = std::strtoul(name.c_str(), &end, 10);
      auto sit = view->streams.find(static_cast<std::uint32_t>(sid));
      if (*end != '\0' || sit == view->streams.end()) {
        orphans.push_back(sdir);
        continue;
      }
      auto topics = co_await storage::list_dir(*io_, storage::join_path(sdir, "topics"));
      for (const auto& tname : topics ? *topics : std::vector<std::string>{}) {
        const unsigned long tid = std::strtoul(tname.c_str(), &end, 10);
        auto tit = sit->second.topics.find(static_cast<std::uint32_t>(tid));
        const std::string tdir = storage::join_path(storage::join_path(sdir, "topics"), tname);
        if (*end != '\0' || tit == sit->second.topics.end()) {
          orphans.push_back(tdir);
          continue;
        }
        auto parts = co_await storage::list_dir(*io_, storage::join_path(tdir, "partitions"));
        for (const auto& pname : parts ? *parts : std::vector<std::string>{}) {
          const unsigned long pid = std::strtoul(pname.c_str(), &end, 10);
          if (*end != '\0' || pid >= tit->second.config.partitions()) {
            orphans.push_back(storage::join_path(storage::join_path(tdir, "partitions"), pname));
          }
        }
      }
    }
  }
  for (const auto& o : orphans) {
    services_->partitions->reporter->notice("removing data of a deleted stream, topic or partition: " + o);
    RILL_CO_TRY_VOID(co_await storage::remove_tree(*io_, o, services_->config->storage.delete_step_bytes));
  }
  publish();
  co_return expected<void>{};
}

task<expected<void>> metadata_actor::commit(proto::MetadataCommand cmd) {
  cmd.set_time_ms(static_cast<std::uint64_t>(services_->partitions->clk->wall_ms().value()));
  RILL_CO_TRY_VOID(state_.check(cmd));
  const std::string bytes = cmd.SerializeAsString();
  const auto* p = reinterpret_cast<const std::byte*>(bytes.data());
  auto committed = co_await group_->submit(operation_metadata_command, std::vector<std::byte>(p, p + bytes.size()));
  if (!committed) {
    // The group is fenced (a failed write or fsync): metadata refuses changes until a restart recovers it.
    services_->partitions->reporter->notice("metadata: " + committed.error().message());
    co_return fail(net::status::storage_error, committed.error().message());
  }
  RILL_CO_TRY_VOID(metadata_machine::decode_reply(*committed));
  co_return expected<void>{};
}

task<expected<void>> metadata_actor::destroy_partitions(std::vector<std::uint64_t> namespaces) {
  for (auto ns : namespaces) {
    auto it = partitions_.find(ns);
    if (it == partitions_.end()) {
      continue;
    }
    caf::actor p = it->second;
    partitions_.erase(it);
    RILL_CO_TRY(r, co_await actor_request<outcome, destroy_atom>(this, p, destroy_atom::value));
    if (!r.ok()) {
      co_return fail(r.st, r.message);
    }
  }
  co_return expected<void>{};
}

task<expected<proto::TopicInfo>> metadata_actor::topic_info(const stream_meta& s, const topic_meta& t) {
  proto::TopicInfo info;
  info.set_stream_id(s.id);
  info.set_id(t.id);
  info.set_name(t.name);
  info.set_created_ms(t.created_ms);
  *info.mutable_config() = t.config;
  for (std::uint32_t p = 0; p < t.config.partitions(); ++p) {
    auto it = partitions_.find(partition_namespace(s.id, t.id, p));
    if (it == partitions_.end()) {
      continue;
    }
    RILL_CO_TRY(pi, co_await actor_request<partition_info, info_atom>(this, it->second, info_atom::value));
    *info.add_partitions() = pi.info;
  }
  co_return info;
}

task<expected<metadata_reply>> metadata_actor::read(std::uint16_t api, std::string header) {
  const auto view = state_.view();
  switch (*net::api_from_wire(api)) {
    case net::api::stream_list: {
      proto::StreamListReply out;
      for (const auto& [id, s] : view->streams) {
        fill_stream(*out.add_streams(), s);
      }
      co_return reply_with(out);
    }
    case net::api::stream_get: {
      RILL_CO_TRY(req, parse_header<proto::StreamGetRequest>(header));
      RILL_CO_TRY(s, view->find_stream(req.stream()));
      proto::StreamGetReply out;
      fill_stream(*out.mutable_stream(), *s);
      for (const auto& [tid, t] : s->topics) {
        RILL_CO_TRY(info, co_await topic_info(*s, t));
        *out.add_topics() = std::move(info);
      }
      co_return reply_with(out);
    }
    case net::api::topic_get: {
      RILL_CO_TRY(req, parse_header<proto::TopicGetRequest>(header));
      RILL_CO_TRY(s, view->find_stream(req.stream()));
      RILL_CO_TRY(t, view->find_topic(*s, req.topic()));
      RILL_CO_TRY(info, co_await topic_info(*s, *t));
      proto::TopicGetReply out;
      *out.mutable_topic() = std::move(info);
      co_return reply_with(out);
    }
    case net::api::topic_list: {
      RILL_CO_TRY(req, parse_header<proto::TopicListRequest>(header));
      RILL_CO_TRY(s, view->find_stream(req.stream()));
      proto::TopicListReply out;
      for (const auto& [tid, t] : s->topics) {
        RILL_CO_TRY(info, co_await topic_info(*s, t));
        *out.add_topics() = std::move(info);
      }
      co_return reply_with(out);
    }
    case net::api::stats: {
      proto::StatsReply out;
      out.set_streams(static_cast<std::uint32_t>(view->streams.size()));
      std::uint32_t topics = 0;
      for (const auto& [sid, s] : view->streams) {
        topics += static_cast<std::uint32_t>(s.topics.size());
      }
      out.set_topics(topics);
      out.set_partitions(static_cast<std::uint32_t>(partitions_.size()));
      out.set_shards(static_cast<std::uint32_t>(services_->shards));
      std::uint64_t messages = 0;
      std::uint64_t bytes = 0;
      std::vector<caf::actor> parts;
      for (const auto& [ns, a] : partitions_) {
        parts.push_back(a);
      }
      for (const auto& a : parts) {
        RILL_CO_TRY(pi, co_await actor_request<partition_info, info_atom>(this, a, info_atom::value));
        messages += pi.info.high_watermark() - pi.info.log_start();
        bytes += pi.info.bytes();
      }
      out.set_messages(messages);
      out.set_bytes(bytes);
      co_return reply_with(out);
    }
    case net::api::group_list: {
      RILL_CO_TRY(req, parse_header<proto::GroupListRequest>(header));
      RILL_CO_TRY(s, view->find_stream(req.stream()));
      RILL_CO_TRY(t, view->find_topic(*s, req.topic()));
      std::vector<caf::actor> actors;
      for (const auto& [gid, g] : t->groups) {
        auto it = groups_.find(group_namespace(s->id, t->id, gid));
        if (it != groups_.end()) {
          actors.push_back(it->second);
        }
      }
      proto::GroupListReply out;
      for (const auto& g : actors) {
        RILL_CO_TRY(described, co_await actor_request<group_reply, describe_atom>(this, g, describe_atom::value));
        if (!described.result.ok()) {
          co_return fail(described.result.st, described.result.message);
        }
        proto::GroupGetReply got;
        got.ParseFromString(described.header);
        *out.add_groups() = std::move(*got.mutable_group());
      }
      co_return reply_with(out);
    }
    default:
      co_return fail(net::status::unknown_api, fmt::format("api {} is not a metadata read", api));
  }
}

task<expected<metadata_reply>> metadata_actor::mutate(std::uint16_t api, std::string header) {
  const auto view = state_.view();
  const std::string& data_dir = services_->config->data_dir;
  switch (*net::api_from_wire(api)) {
    case net::api::stream_create: {
      RILL_CO_TRY(req, parse_header<proto::StreamCreateRequest>(header));
      proto::MetadataCommand cmd;
      cmd.mutable_create_stream()->set_name(req.name());
      RILL_CO_TRY_VOID(co_await commit(cmd));
      publish();
      proto::StreamCreateReply out;
      const auto& streams = state_.view()->streams;
      for (const auto& [id, s] : streams) {
        if (s.name == req.name()) {
          fill_stream(*out.mutable_stream(), s);
        }
      }
      co_return reply_with(out);
    }
    case net::api::stream_update: {
      RILL_CO_TRY(req, parse_header<proto::StreamUpdateRequest>(header));
      RILL_CO_TRY(s, view->find_stream(req.stream()));
      proto::MetadataCommand cmd;
      cmd.mutable_update_stream()->set_stream_id(s->id);
      cmd.mutable_update_stream()->set_name(req.name());
      RILL_CO_TRY_VOID(co_await commit(cmd));
      publish();
      proto::StreamUpdateReply out;
      fill_stream(*out.mutable_stream(), state_.view()->streams.at(s->id));
      co_return reply_with(out);
    }
    case net::api::stream_delete: {
      RILL_CO_TRY(req, parse_header<proto::StreamDeleteRequest>(header));
      RILL_CO_TRY(s, view->find_stream(req.stream()));
      const std::uint32_t sid = s->id;
      std::vector<std::uint64_t> doomed;
      std::vector<std::uint64_t> doomed_groups;
      for (const auto& [tid, t] : s->topics) {
        for (std::uint32_t p = 0; p < t.config.partitions(); ++p) {
          doomed.push_back(partition_namespace(sid, tid, p));
        }
        for (const auto& [gid, g] : t.groups) {
          doomed_groups.push_back(group_namespace(sid, tid, gid));
        }
      }
      proto::MetadataCommand cmd;
      cmd.mutable_delete_stream()->set_stream_id(sid);
      RILL_CO_TRY_VOID(co_await commit(cmd));  // first: a crash after it leaves only data, which recovery removes
      RILL_CO_TRY_VOID(co_await destroy_partitions(doomed));
      RILL_CO_TRY_VOID(co_await destroy_groups(doomed_groups));
      publish();
      RILL_CO_TRY_VOID(co_await storage::remove_tree(*io_, fmt::format("{}/groups/{}", data_dir, sid),
                                                     services_->config->storage.delete_step_bytes));
      RILL_CO_TRY_VOID(co_await storage::remove_tree(*io_, fmt::format("{}/{}", streams_root(data_dir), sid),
                                                     services_->config->storage.delete_step_bytes));
      co_return reply_with(proto::StreamDeleteReply{});
    }
    case net::api::topic_create: {
      RILL_CO_TRY(req, parse_header<proto::TopicCreateRequest>(header));
      RILL_CO_TRY(s, view->find_stream(req.stream()));
      RILL_CO_TRY(config, complete_topic_config(req.config(), services_->config->storage));
      proto::MetadataCommand cmd;
      auto* c = cmd.mutable_create_topic();
      c->set_stream_id(s->id);
      c->set_name(req.name());
      *c->mutable_config() = config;
      RILL_CO_TRY_VOID(co_await commit(cmd));
      const auto now = state_.view();
      const stream_meta& stream = now->streams.at(s->id);
      const topic_meta* created = nullptr;
      for (const auto& [tid, t] : stream.topics) {
        if (t.name == req.name()) {
          created = &t;
        }
      }
      spawn_partitions(stream.id, created->id, 0, created->config.partitions());
      publish();
      RILL_CO_TRY(info, co_await topic_info(stream, *created));
      proto::TopicCreateReply out;
      *out.mutable_topic() = std::move(info);
      co_return reply_with(out);
    }
    case net::api::topic_update: {
      RILL_CO_TRY(req, parse_header<proto::TopicUpdateRequest>(header));
      RILL_CO_TRY(s, view->find_stream(req.stream()));
      RILL_CO_TRY(t, view->find_topic(*s, req.topic()));
      const std::uint32_t sid = s->id;
      const std::uint32_t tid = t->id;
      proto::MetadataCommand cmd;
      auto* c = cmd.mutable_update_topic();
      c->set_stream_id(sid);
      c->set_topic_id(tid);
      if (req.has_name()) {
        c->set_name(req.name());
      }
      *c->mutable_config() = req.config();
      RILL_CO_TRY_VOID(co_await commit(cmd));
      // The partitions reopen with the new settings.
      const auto now = state_.view();
      const topic_meta& updated = now->streams.at(sid).topics.at(tid);
      for (std::uint32_t p = 0; p < updated.config.partitions(); ++p) {
        auto it = partitions_.find(partition_namespace(sid, tid, p));
        if (it != partitions_.end()) {
          (void)co_await actor_request<outcome, close_atom>(this, it->second, close_atom::value);
        }
      }
      spawn_partitions(sid, tid, 0, updated.config.partitions());
      publish();
      RILL_CO_TRY(info, co_await topic_info(now->streams.at(sid), updated));
      proto::TopicUpdateReply out;
      *out.mutable_topic() = std::move(info);
      co_return reply_with(out);
    }
    case net::api::topic_delete: {
      RILL_CO_TRY(req, parse_header<proto::TopicDeleteRequest>(header));
      RILL_CO_TRY(s, view->find_stream(req.stream()));
      RILL_CO_TRY(t, view->find_topic(*s, req.topic()));
      const std::uint32_t sid = s->id;
      const std::uint32_t tid = t->id;
      std::vector<std::uint64_t> doomed;
      for (std::uint32_t p = 0; p < t->config.partitions(); ++p) {
        doomed.push_back(partition_namespace(sid, tid, p));
      }
      std::vector<std::uint64_t> doomed_groups;
      for (const auto& [gid, g] : t->groups) {
        doomed_groups.push_back(group_namespace(sid, tid, gid));
      }
      proto::MetadataCommand cmd;
      cmd.mutable_delete_topic()->set_stream_id(sid);
      cmd.mutable_delete_topic()->set_topic_id(tid);
      RILL_CO_TRY_VOID(co_await commit(cmd));
      RILL_CO_TRY_VOID(co_await destroy_partitions(doomed));
      RILL_CO_TRY_VOID(co_await destroy_groups(doomed_groups));
      publish();
      RILL_CO_TRY_VOID(co_await storage::remove_tree(*io_, fmt::format("{}/groups/{}/{}", data_dir, sid, tid),
                                                     services_->config->storage.delete_step_bytes));
      RILL_CO_TRY_VOID(co_await storage::remove_tree(*io_,
                                                     fmt::format("{}/{}/topics/{}", streams_root(data_dir), sid, tid),
                                                     services_->config->storage.delete_step_bytes));
      co_return reply_with(proto::TopicDeleteReply{});
    }
    case net::api::partitions_add:
    case net::api::partitions_delete: {
      const bool add = *net::api_from_wire(api) == net::api::partitions_add;
      RILL_CO_TRY(req, parse_header<proto::PartitionsAddRequest>(header));  // same fields as PartitionsDeleteRequest
      RILL_CO_TRY(s, view->find_stream(req.stream()));
      RILL_CO_TRY(t, view->find_topic(*s, req.topic()));
      const std::uint32_t sid = s->id;
      const std::uint32_t tid = t->id;
      const std::uint32_t before = t->config.partitions();
      proto::MetadataCommand cmd;
      if (add) {
        cmd.mutable_add_partitions()->set_stream_id(sid);
        cmd.mutable_add_partitions()->set_topic_id(tid);
        cmd.mutable_add_partitions()->set_count(req.count());
      } else {
        cmd.mutable_delete_partitions()->set_stream_id(sid);
        cmd.mutable_delete_partitions()->set_topic_id(tid);
        cmd.mutable_delete_partitions()->set_count(req.count());
      }
      RILL_CO_TRY_VOID(co_await commit(cmd));
      if (add) {
        spawn_partitions(sid, tid, before, before + req.count());
      } else {
        std::vector<std::uint64_t> doomed;
        for (std::uint32_t p = before - req.count(); p < before; ++p) {
          doomed.push_back(partition_namespace(sid, tid, p));
        }
        RILL_CO_TRY_VOID(co_await destroy_partitions(doomed));
      }
      publish();
      const auto now = state_.view();
      resize_groups(sid, now->streams.at(sid).topics.at(tid));
      RILL_CO_TRY(info, co_await topic_info(now->streams.at(sid), now->streams.at(sid).topics.at(tid)));
      proto::PartitionsAddReply out;
      *out.mutable_topic() = std::move(info);
      co_return reply_with(out);
    }
    case net::api::group_create: {
      RILL_CO_TRY(req, parse_header<proto::GroupCreateRequest>(header));
      RILL_CO_TRY(s, view->find_stream(req.stream()));
      RILL_CO_TRY(t, view->find_topic(*s, req.topic()));
      RILL_CO_TRY(config, complete_group_config(req.config()));
      const std::uint32_t sid = s->id;
      const std::uint32_t tid = t->id;
      proto::MetadataCommand cmd;
      auto* c = cmd.mutable_create_group();
      c->set_stream_id(sid);
      c->set_topic_id(tid);
      c->set_name(req.name());
      *c->mutable_config() = config;
      RILL_CO_TRY_VOID(co_await commit(cmd));
      const auto now = state_.view();
      const topic_meta& topic = now->streams.at(sid).topics.at(tid);
      proto::Identifier named;
      named.set_name(req.name());
      RILL_CO_TRY(g, metadata_view::find_group(topic, named));
      spawn_group(sid, topic, *g);
      publish();
      RILL_CO_TRY(described, co_await actor_request<group_reply, describe_atom>(
                                 this, groups_.at(group_namespace(sid, tid, g->id)), describe_atom::value));
      if (!described.result.ok()) {
        co_return fail(described.result.st, described.result.message);
      }
      proto::GroupGetReply got;
      got.ParseFromString(described.header);
      proto::GroupCreateReply out;
      *out.mutable_group() = std::move(*got.mutable_group());
      co_return reply_with(out);
    }
    case net::api::group_delete: {
      RILL_CO_TRY(req, parse_header<proto::GroupDeleteRequest>(header));
      RILL_CO_TRY(s, view->find_stream(req.stream()));
      RILL_CO_TRY(t, view->find_topic(*s, req.topic()));
      RILL_CO_TRY(g, metadata_view::find_group(*t, req.group()));
      const std::uint64_t ns = group_namespace(s->id, t->id, g->id);
      proto::MetadataCommand cmd;
      cmd.mutable_delete_group()->set_stream_id(s->id);
      cmd.mutable_delete_group()->set_topic_id(t->id);
      cmd.mutable_delete_group()->set_group_id(g->id);
      RILL_CO_TRY_VOID(co_await commit(cmd));
      std::vector<std::uint64_t> doomed{ns};
      RILL_CO_TRY_VOID(co_await destroy_groups(std::move(doomed)));
      publish();
      co_return reply_with(proto::GroupDeleteReply{});
    }
    default:
      co_return fail(net::status::unknown_api, fmt::format("api {} is not a metadata change", api));
  }
}

}  // namespace rill::actors
