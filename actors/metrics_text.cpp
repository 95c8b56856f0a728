// metrics: Prometheus text exposition and JSON of actor, shard and process samples (see metrics.h).
#include <nlohmann/json.hpp>

#include <fmt/core.h>

#include "actors/metrics.h"

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
      const auto l = fmt::format(R"({},type="{}")", labels, escape(t.type));
      std::uint64_t cumulative = 0;
      for (std::size_t b = 0; b < latency_histogram::bounds_ns.size(); ++b) {
        cumulative += t.latency.counts[b];
        out += fmt::format("rill_actor_handling_seconds_bucket{{{},le=\"{}\"}} {}\n", l,
                           static_cast<double>(latency_histogram::bounds_ns[b]) / 1e9, cumulative);
      }
      cumulative += t.latency.counts.back();
      // +Inf must equal _count: both come from the same bucket reads.
      out += fmt::format("rill_actor_handling_seconds_bucket{{{},le=\"+Inf\"}} {}\n", l, cumulative);
      out += fmt::format("rill_actor_handling_seconds_sum{{{}}} {}\n", l, seconds(t.latency.sum_ns));
      out += fmt::format("rill_actor_handling_seconds_count{{{}}} {}\n", l, cumulative);
    }
  }
  family(out, "rill_shard_jobs_total", "counter", "Actor runs the shard's worker performed.");
  for (const auto& s : shards) {
    out += fmt::format("rill_shard_jobs_total{{shard=\"{}\"}} {}\n", s.index, s.jobs_run);
  }
  family(out, "rill_shard_run_queue_length", "gauge", "Actors waiting to run on the shard.");
  for (const auto& s : shards) {
    out += fmt::format("rill_shard_run_queue_length{{shard=\"{}\"}} {}\n", s.index, s.run_queue);
  }
  family(out, "rill_shard_actors", "gauge", "Actors living on the shard.");
  for (const auto& s : shards) {
    out += fmt::format("rill_shard_actors{{shard=\"{}\"}} {}\n", s.index, s.actors);
  }
  family(out, "rill_shard_busy_seconds_total", "counter", "Time the shard's actors spent handling messages.");
  for (const auto& s : shards) {
    out += fmt::format("rill_shard_busy_seconds_total{{shard=\"{}\"}} {}\n", s.index, seconds(s.busy_ns));
  }
  family(out, "rill_shard_io_completions_total", "counter", "io_uring completions the shard reaped.");
  for (const auto& s : shards) {
    out += fmt::format("rill_shard_io_completions_total{{shard=\"{}\"}} {}\n", s.index, s.completions);
  }
  family(out, "rill_shard_timers_fired_total", "counter", "Deadline-heap timers that fired on the shard.");
  for (const auto& s : shards) {
    out += fmt::format("rill_shard_timers_fired_total{{shard=\"{}\"}} {}\n", s.index, s.timers_fired);
  }
  family(out, "rill_shard_sleeps_total", "counter", "Times the shard's worker slept waiting for work.");
  for (const auto& s : shards) {
    out += fmt::format("rill_shard_sleeps_total{{shard=\"{}\"}} {}\n", s.index, s.sleeps);
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

std::string render_shards_json(const std::vector<shard_sample>& shards) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& s : shards) {
    all.push_back({{"shard", s.index},
                   {"jobs", s.jobs_run},
                   {"run_queue", s.run_queue},
                   {"actors", s.actors},
                   {"busy_ns", s.busy_ns},
                   {"io_completions", s.completions},
                   {"timers_fired", s.timers_fired},
                   {"sleeps", s.sleeps},
                   {"wakes_sent", s.wakes_sent}});
  }
  return all.dump();
}

}  // namespace rill::actors
