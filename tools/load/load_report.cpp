// load_report: series merging and the three output formats.
#include "tools/load/load_report.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace rill::bench {
namespace {

constexpr std::int64_t seconds_max = 7 * 24 * 3600;  // per-second slots kept (a week); later ones share the last

std::int64_t second_of(series::duration at) {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(at).count();
  return std::clamp<std::int64_t>(s, 0, seconds_max - 1);
}

double us(const histogram& h, double p) {
  return static_cast<double>(h.percentile(p)) / 1000.0;
}

struct percentile_row {
  const char* name;
  double p;
};
constexpr percentile_row percentiles[] = {{"p50", 50}, {"p90", 90}, {"p99", 99}, {"p99_9", 99.9}, {"p99_99", 99.99}};

std::string human_us(double v) {
  if (v >= 1e6) {
    return fmt::format("{:.2f} s", v / 1e6);
  }
  if (v >= 1e3) {
    return fmt::format("{:.2f} ms", v / 1e3);
  }
  return fmt::format("{:.0f} us", v);
}

std::string with_commas(std::uint64_t v) {
  const auto digits = std::to_string(v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) {
      out.push_back(',');
    }
    out.push_back(digits[i]);
  }
  return out;
}

}  // namespace

void series::writer::move_to(duration at) {
  if (at < duration::zero()) {
    at = duration::zero();
  }
  last_at_ = std::max(last_at_, at);
  const auto index = second_of(at);
  if (index != index_) {
    flush();
    index_ = index;
  }
}

void series::writer::record(duration at, std::uint64_t messages, std::uint64_t bytes,
                            std::optional<std::uint64_t> latency_ns) {
  move_to(at);
  current_.messages += messages;
  current_.bytes += bytes;
  if (latency_ns) {
    current_.latency.record(*latency_ns);
  }
}

void series::writer::latency(duration at, std::uint64_t ns) {
  move_to(at);
  current_.latency.record(ns);
}

void series::writer::flush() {
  if (index_ >= 0) {
    series_.merge(index_, current_, last_at_);
    current_.messages = 0;
    current_.bytes = 0;
    current_.latency.reset();
  }
  index_ = -1;
}

void series::merge(std::int64_t index, const second& s, duration last_at) {
  std::lock_guard lock(mu_);
  const auto i = static_cast<std::size_t>(index);
  while (seconds_.size() <= i) {
    seconds_.push_back(std::make_unique<second>());
  }
  auto& slot = *seconds_[i];
  slot.messages += s.messages;
  slot.bytes += s.bytes;
  slot.latency.merge(s.latency);
  messages_ += s.messages;
  bytes_ += s.bytes;
  latency_.merge(s.latency);
  last_at_ = std::max(last_at_, last_at);
}

void print_report(const report& r) {
  const auto& o = *r.options;
  if (o.json) {
    nlohmann::ordered_json j;
    j["system"] = r.system;
    j["mode"] = std::string(to_string(r.mode));
    j["settings"] = r.settings;
    j["producers"] = o.producers;
    if (r.mode != load_mode::produce) {
      j["consumers"] = o.consumers;
      j["fetch"] = o.fetch;
    }
    j["streams"] = o.streams;
    j["partitions"] = o.partitions;
    j["message_size"] = o.message_size;
    j["batch"] = o.batch;
    j["duration_s"] = o.duration_s;
    j["messages_requested"] = o.messages;
    j["rate"] = o.rate;
    j["warmup_s"] = o.warmup_s;
    j["sync"] = o.sync;
    j["compression"] = o.compression;
    j["partitioning"] = o.partitioning;
    j["keys"] = o.keys;
    for (const auto& role : r.roles) {
      const auto& d = *role.data;
      auto& x = j[role.name];
      x["messages"] = d.messages();
      x["bytes"] = d.bytes();
      x["seconds"] = role.seconds;
      x["msgs_per_s"] = role.seconds > 0 ? static_cast<double>(d.messages()) / role.seconds : 0.0;
      x["mb_per_s"] = role.seconds > 0 ? static_cast<double>(d.bytes()) / 1e6 / role.seconds : 0.0;
      x["latency"] = role.latency_meaning;
      auto& l = x["latency_us"];
      for (const auto& p : percentiles) {
        l[p.name] = us(d.latency(), p.p);
      }
      l["max"] = static_cast<double>(d.latency().max()) / 1000.0;
      l["mean"] = d.latency().mean() / 1000.0;
      l["count"] = d.latency().count();
    }
    fmt::print("{}\n", j.dump());
    return;
  }
  fmt::print("{} {}: {} B messages, batches of {}, {} producer(s){}, {} stream(s) x {} partition(s), ", r.system,
             to_string(r.mode), o.message_size, o.batch, o.producers,
             r.mode == load_mode::produce ? "" : fmt::format(", {} consumer(s)", o.consumers), o.streams, o.partitions);
  if (o.messages > 0) {
    fmt::print("{} messages", o.messages);
  } else {
    fmt::print("{} s", o.duration_s);
  }
  if (o.warmup_s > 0) {
    fmt::print(" after {} s of warm-up", o.warmup_s);
  }
  if (o.rate > 0) {
    fmt::print(", at {} msg/s", o.rate);
  }
  fmt::print("\n  {}\n", r.settings);
  for (const auto& role : r.roles) {
    const auto& d = *role.data;
    const double secs = role.seconds > 0 ? role.seconds : 1;
    fmt::print("{:<11} {:>12} msg/s {:>9.1f} MB/s   ({} messages in {:.2f} s)\n", role.name,
               with_commas(static_cast<std::uint64_t>(static_cast<double>(d.messages()) / secs)),
               static_cast<double>(d.bytes()) / 1e6 / secs, with_commas(d.messages()), role.seconds);
    fmt::print("  latency {}:\n   ", role.latency_meaning);
    for (const auto& p : percentiles) {
      fmt::print(" {} {}", p.name, human_us(us(d.latency(), p.p)));
    }
    fmt::print(" max {}\n", human_us(static_cast<double>(d.latency().max()) / 1000.0));
  }
}

expected<void> write_csv(const report& r, const std::string& path) {
  std::ofstream f(path, std::ios::trunc);
  if (!f) {
    return load_error(fmt::format("--output {}: {}", path, std::strerror(errno)));
  }
  f << "second,role,messages,msgs_per_s,mb_per_s,p50_us,p90_us,p99_us,p99_9_us,max_us\n";
  for (const auto& role : r.roles) {
    const auto& secs = role.data->seconds();
    for (std::size_t i = 0; i < secs.size(); ++i) {
      const auto& s = *secs[i];
      f << fmt::format("{},{},{},{},{:.3f},{:.1f},{:.1f},{:.1f},{:.1f},{:.1f}\n", i, role.name, s.messages, s.messages,
                       static_cast<double>(s.bytes) / 1e6, us(s.latency, 50), us(s.latency, 90), us(s.latency, 99),
                       us(s.latency, 99.9), static_cast<double>(s.latency.max()) / 1000.0);
    }
  }
  f.flush();
  if (!f) {
    return load_error(fmt::format("--output {}: write failed", path));
  }
  return {};
}

}  // namespace rill::bench
