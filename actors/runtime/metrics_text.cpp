// metrics: Prometheus text exposition and JSON of actor, shard and process samples (see metrics.h).
#include <nlohmann/json.hpp>

#include <fmt/core.h>

#include "actors/runtime/metrics.h"

#include <map>
#include <tuple>

namespace rill::actors {
namespace {

// A label value as the text format wants it: backslash, double quote and newline escaped.
std::string escape(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (const char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string actor_labels(const actor_sample& a) {
  return fmt::format(R"(kind="{}",name="{}",shard="{}",id="{}")", escape(a.kind), escape(a.name), a.shard, a.id);
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

std::string seconds(std::uint64_t ns) {
  return fmt::format("{:.9f}", static_cast<double>(ns) / 1e9);
}

// One Prometheus histogram series (`labels` without `le`).
void histogram_series(std::string& out, const char* name, const std::string& labels,
                      const latency_histogram::snapshot& h) {
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < latency_histogram::bounds_ns.size(); ++b) {
    cumulative += h.counts[b];
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels,
                       static_cast<double>(latency_histogram::bounds_ns[b]) / 1e9, cumulative);
  }
  cumulative += h.counts.back();
  // +Inf and _count come from the same bucket reads, so they agree.
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, cumulative);
  out += fmt::format("{}_sum{{{}}} {}\n", name, labels, seconds(h.sum_ns));
  out += fmt::format("{}_count{{{}}} {}\n", name, labels, cumulative);
}

std::string partition_labels(const partition_sample& p) {
  return fmt::format(R"(stream="{}",topic="{}",partition="{}")", p.stream_id, p.topic_id, p.partition_id);
}

}  // namespace

std::string render_prometheus(const std::vector<actor_sample>& actors, const std::vector<shard_sample>& shards,
                              const process_sample& process) {
  std::string out;
  family(out, "rill_actor_messages_received_total", "counter", "Messages enqueued to the actor.");
  for (const auto& a : actors) {
    out += fmt::format("rill_actor_messages_received_total{{{}}} {}\n", actor_labels(a), a.received);
  }
  family(out, "rill_actor_messages_processed_total", "counter", "Messages the actor has handled.");
  for (const auto& a : actors) {
    out += fmt::format("rill_actor_messages_processed_total{{{}}} {}\n", actor_labels(a), a.processed);
  }
  family(out, "rill_actor_mailbox_depth", "gauge", "Messages received and not yet handled.");
  for (const auto& a : actors) {
    out += fmt::format("rill_actor_mailbox_depth{{{}}} {}\n", actor_labels(a), a.mailbox());
  }
  family(out, "rill_actor_busy_seconds_total", "counter", "Time the actor spent handling messages.");
  for (const auto& a : actors) {
    out += fmt::format("rill_actor_busy_seconds_total{{{}}} {}\n", actor_labels(a), seconds(a.busy_ns));
  }
  family(out, "rill_actor_handling_seconds", "histogram", "Time to handle one message, by message type.");
  for (const auto& a : actors) {
    const auto labels = actor_labels(a);
    for (const auto& t : a.types) {
      histogram_series(out, "rill_actor_handling_seconds", fmt::format(R"({},type="{}")", labels, escape(t.type)),
                       t.latency);
    }
  }
  // Partitions.
  struct gauge {
    const char* name;
    const char* help;
    std::int64_t (*value)(const partition_sample&);
  };
  static const gauge partition_gauges[] = {
      {"rill_partition_log_start_offset", "First offset still in the log.",
       [](const partition_sample& p) { return p.log_start; }},
      {"rill_partition_high_watermark", "Offset below which records are committed (visible to consumers).",
       [](const partition_sample& p) { return p.high_watermark; }},
      {"rill_partition_log_end_offset", "Offset the next record gets.",
       [](const partition_sample& p) { return p.log_end; }},
      {"rill_partition_segments", "Segment files of the log.",
       [](const partition_sample& p) { return static_cast<std::int64_t>(p.segments); }},
      {"rill_partition_bytes", "Bytes of the log's segments.",
       [](const partition_sample& p) { return static_cast<std::int64_t>(p.bytes); }},
  };
  for (const auto& g : partition_gauges) {
    family(out, g.name, "gauge", g.help);
    for (const auto& a : actors) {
      if (a.partition) {
        out += fmt::format("{}{{{}}} {}\n", g.name, partition_labels(*a.partition), g.value(*a.partition));
      }
    }
  }
  family(out, "rill_partition_produce_errors_total", "counter", "Produce requests the partition refused or failed.");
  for (const auto& a : actors) {
    if (a.partition) {
      out += fmt::format("rill_partition_produce_errors_total{{{}}} {}\n", partition_labels(*a.partition),
                         a.partition->produce_errors);
    }
  }
  family(out, "rill_partition_retention_runs_total", "counter", "Retention passes over the partition.");
  for (const auto& a : actors) {
    if (a.partition) {
      out += fmt::format("rill_partition_retention_runs_total{{{}}} {}\n", partition_labels(*a.partition),
                         a.partition->retention_runs);
    }
  }
  family(out, "rill_partition_produce_seconds", "histogram",
         "A produce request at the partition, from its arrival to its acknowledgement.");
  for (const auto& a : actors) {
    if (a.partition) {
      histogram_series(out, "rill_partition_produce_seconds", partition_labels(*a.partition), a.partition->produce);
    }
  }
  family(out, "rill_partition_write_seconds", "histogram",
         "A group of appends written to the log (with its fdatasync under sync_before_ack).");
  for (const auto& a : actors) {
    if (a.partition) {
      histogram_series(out, "rill_partition_write_seconds", partition_labels(*a.partition), a.partition->write);
    }
  }
  family(out, "rill_partition_sync_seconds", "histogram", "An fdatasync of a relaxed durability policy.");
  for (const auto& a : actors) {
    if (a.partition) {
      histogram_series(out, "rill_partition_sync_seconds", partition_labels(*a.partition), a.partition->sync);
    }
  }
  // Connections.
  struct counter {
    const char* name;
    const char* help;
    std::uint64_t (*value)(const connection_sample&);
  };
  static const counter connection_counters[] = {
      {"rill_connection_requests_total", "Requests read from the connection.",
       [](const connection_sample& c) { return c.requests; }},
      {"rill_connection_errors_total", "Replies with an error status.",
       [](const connection_sample& c) { return c.errors; }},
      {"rill_connection_received_bytes_total", "Request bytes read.",
       [](const connection_sample& c) { return c.bytes_in; }},
      {"rill_connection_sent_bytes_total", "Reply bytes queued to the client.",
       [](const connection_sample& c) { return c.bytes_out; }},
  };
  for (const auto& c : connection_counters) {
    family(out, c.name, "counter", c.help);
    for (const auto& a : actors) {
      if (a.connection) {
        out += fmt::format(R"({}{{peer="{}",id="{}"}} {})", c.name, escape(a.name), a.id, c.value(*a.connection));
        out += '\n';
      }
    }
  }
  family(out, "rill_connection_receive_buffer_bytes", "gauge",
         "The pooled receive buffer the connection holds (0 while it is idle).");
  for (const auto& a : actors) {
    if (a.connection) {
      out += fmt::format(R"(rill_connection_receive_buffer_bytes{{peer="{}",id="{}"}} {})", escape(a.name), a.id,
                         a.connection->recv_buffer_bytes);
      out += '\n';
    }
  }
  // Groups; lag from the partitions' high watermarks.
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, const partition_sample*> parts;
  for (const auto& a : actors) {
    if (a.partition) {
      parts[{a.partition->stream_id, a.partition->topic_id, a.partition->partition_id}] = &*a.partition;
    }
  }
  auto group_labels = [](const group_sample& g) {
    return fmt::format(R"(stream="{}",topic="{}",group="{}")", g.stream_id, g.topic_id, escape(g.name));
  };
  family(out, "rill_group_members", "gauge", "Members of the consumer group.");
  for (const auto& a : actors) {
    if (a.group) {
      out += fmt::format("rill_group_members{{{}}} {}\n", group_labels(*a.group), a.group->members);
    }
  }
  family(out, "rill_group_generation", "gauge", "The consumer group's generation.");
  for (const auto& a : actors) {
    if (a.group) {
      out += fmt::format("rill_group_generation{{{}}} {}\n", group_labels(*a.group), a.group->generation);
    }
  }
  family(out, "rill_group_rebalances_total", "counter", "Generations the group started since rilld started.");
  for (const auto& a : actors) {
    if (a.group) {
      out += fmt::format("rill_group_rebalances_total{{{}}} {}\n", group_labels(*a.group), a.group->rebalances);
    }
  }
  family(out, "rill_group_lag", "gauge",
         "Committed records the group has not consumed: high watermark minus the committed offset (or the log start).");
  for (const auto& a : actors) {
    if (!a.group) {
      continue;
    }
    for (std::uint32_t p = 0; p < a.group->committed.size(); ++p) {
      auto it = parts.find({a.group->stream_id, a.group->topic_id, p});
      if (it == parts.end()) {
        continue;
      }
      const auto from =
          std::max<std::int64_t>(static_cast<std::int64_t>(a.group->committed[p].value_or(0)), it->second->log_start);
      out += fmt::format("rill_group_lag{{{},partition=\"{}\"}} {}\n", group_labels(*a.group), p,
                         std::max<std::int64_t>(0, it->second->high_watermark - from));
    }
  }
  // Shards: one family per field, one sample per shard.
  struct shard_family {
    const char* name;
    const char* type;
    const char* help;
    std::string (*value)(const shard_sample&);
  };
  static const shard_family shard_families[] = {
      {"rill_shard_jobs_total", "counter", "Actor runs the shard's worker performed.",
       [](const shard_sample& s) { return std::to_string(s.jobs_run); }},
      {"rill_shard_run_queue_length", "gauge", "Actors waiting to run on the shard.",
       [](const shard_sample& s) { return std::to_string(s.run_queue); }},
      {"rill_shard_actors", "gauge", "Actors living on the shard.",
       [](const shard_sample& s) { return std::to_string(s.actors); }},
      {"rill_shard_busy_seconds_total", "counter", "Time the shard's actors spent handling messages.",
       [](const shard_sample& s) { return seconds(s.busy_ns); }},
      {"rill_shard_io_completions_total", "counter", "io_uring completions the shard reaped.",
       [](const shard_sample& s) { return std::to_string(s.completions); }},
      {"rill_shard_io_submissions_total", "counter", "io_uring submissions of the shard.",
       [](const shard_sample& s) { return std::to_string(s.submissions); }},
      {"rill_shard_io_in_flight", "gauge", "io_uring operations submitted and not yet completed.",
       [](const shard_sample& s) { return std::to_string(s.in_flight); }},
      {"rill_shard_buffer_pool_cached_bytes", "gauge", "Freed I/O buffers the shard keeps for reuse.",
       [](const shard_sample& s) { return std::to_string(s.pool_cached_bytes); }},
      {"rill_shard_buffer_pool_outstanding_buffers", "gauge", "I/O buffers of the shard in use.",
       [](const shard_sample& s) { return std::to_string(s.pool_outstanding); }},
      {"rill_shard_timers_fired_total", "counter", "Deadline-heap timers that fired on the shard.",
       [](const shard_sample& s) { return std::to_string(s.timers_fired); }},
      {"rill_shard_sleeps_total", "counter", "Times the shard's worker slept waiting for work.",
       [](const shard_sample& s) { return std::to_string(s.sleeps); }},
  };
  for (const auto& f : shard_families) {
    family(out, f.name, f.type, f.help);
    for (const auto& s : shards) {
      out += fmt::format("{}{{shard=\"{}\"}} {}\n", f.name, s.index, f.value(s));
    }
  }
  // Storage descriptors (storage/file_cache.h): each shard's cache of open segment and superblock files.
  family(out, "rill_storage_open_files", "gauge",
         "Storage file descriptors the shard holds open (segments, superblocks), under limits.open_files_max.");
  for (const auto& s : shards) {
    out += fmt::format("rill_storage_open_files{{shard=\"{}\"}} {}\n", s.index, s.open_files);
  }
  family(out, "rill_storage_open_file_evictions_total", "counter",
         "Idle storage files the shard closed to stay under limits.open_files_max (reopened when next used).");
  for (const auto& s : shards) {
    out += fmt::format("rill_storage_open_file_evictions_total{{shard=\"{}\"}} {}\n", s.index, s.open_file_evictions);
  }
  family(out, "rill_process_uptime_seconds", "gauge", "Time since rilld started.");
  out += fmt::format("rill_process_uptime_seconds {}\n", static_cast<double>(process.uptime_ms) / 1000.0);
  family(out, "rill_process_resident_memory_bytes", "gauge", "Resident memory of rilld.");
  out += fmt::format("rill_process_resident_memory_bytes {}\n", process.resident_bytes);
  family(out, "rill_process_open_fds", "gauge", "Open file descriptors of rilld.");
  out += fmt::format("rill_process_open_fds {}\n", process.open_files);
  family(out, "rill_connections", "gauge", "Open client connections.");
  out += fmt::format("rill_connections {}\n", process.connections);
  return out;
}

std::string render_actors_json(const std::vector<actor_sample>& actors) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& a : actors) {
    nlohmann::json types = nlohmann::json::object();
    for (const auto& t : a.types) {
      types[t.type] = {{"count", t.latency.count}, {"sum_ns", t.latency.sum_ns}};
    }
    all.push_back({{"id", a.id},
                   {"kind", a.kind},
                   {"name", a.name},
                   {"shard", a.shard},
                   {"received", a.received},
                   {"processed", a.processed},
                   {"mailbox", a.mailbox()},
                   {"busy_ns", a.busy_ns},
                   {"types", types}});
  }
  return all.dump();
}

std::string render_partitions_json(const std::vector<actor_sample>& actors) {
  nlohmann::json all = nlohmann::json::array();
  auto hist = [](const latency_histogram::snapshot& h) {
    return nlohmann::json{{"count", h.count}, {"sum_ns", h.sum_ns}};
  };
  for (const auto& a : actors) {
    if (!a.partition) {
      continue;
    }
    const auto& p = *a.partition;
    all.push_back({{"stream", p.stream_id},
                   {"topic", p.topic_id},
                   {"partition", p.partition_id},
                   {"shard", a.shard},
                   {"log_start", p.log_start},
                   {"high_watermark", p.high_watermark},
                   {"log_end", p.log_end},
                   {"segments", p.segments},
                   {"bytes", p.bytes},
                   {"produce_errors", p.produce_errors},
                   {"retention_runs", p.retention_runs},
                   {"mailbox", a.mailbox()},
                   {"produce", hist(p.produce)},
                   {"write", hist(p.write)},
                   {"sync", hist(p.sync)}});
  }
  return all.dump();
}

std::string render_shards_json(const std::vector<shard_sample>& shards) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& s : shards) {
    all.push_back({{"shard", s.index},
                   {"jobs", s.jobs_run},
                   {"run_queue", s.run_queue},
                   {"actors", s.actors},
                   {"busy_ns", s.busy_ns},
                   {"io_completions", s.completions},
                   {"io_submissions", s.submissions},
                   {"io_in_flight", s.in_flight},
                   {"buffer_pool_cached_bytes", s.pool_cached_bytes},
                   {"buffer_pool_outstanding", s.pool_outstanding},
                   {"timers_fired", s.timers_fired},
                   {"sleeps", s.sleeps},
                   {"wakes_sent", s.wakes_sent}});
  }
  return all.dump();
}

}  // namespace rill::actors
