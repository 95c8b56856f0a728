// redis-bench: the load harness (tools/load) driving Redis Streams through Debian's hiredis, so that bench/compare
// measures Redis with the same threads, pacing and histograms as rill-bench.
//
//   redis-bench produce|consume|produce-consume --server HOST:PORT ... (the options of rill-bench's load modes)
//
// Units: stream key `<prefix>:<s>:<p>`. A producer pipelines its batch as --batch XADD commands (`XADD key * v
// <value>`, plus `k <key>` when keyed) and then reads every reply: one batch in flight, with the pipeline depth equal
// to rill's batch size. Consumers read their keys with XREAD COUNT --fetch (BLOCK 100 when they have one key).
//
// Durability is the server's: setup reads CONFIG GET appendonly / appendfsync and refuses a mismatch.
//   --sync before-ack  needs appendonly yes + appendfsync always (Redis fsyncs the AOF before replying)
//   --sync none        needs appendonly yes + appendfsync everysec
#include <hiredis/hiredis.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "config/address.h"
#include "tools/load/load.h"

namespace {

using namespace rill;
using namespace rill::bench;

struct reply_deleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

struct context_deleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;

rill::expected<context_ptr> connect(const load_options& o) {
  auto addr = config::parse_address(o.server);
  if (!addr) {
    return load_error(fmt::format("--server {}: {}", o.server, addr.error().detail()));
  }
  context_ptr c(redisConnect(addr->host.c_str(), addr->port));
  if (!c || c->err != 0) {
    return load_error(fmt::format("connect {}: {}", o.server, c ? c->errstr : "out of memory"));
  }
  return c;
}

rill::expected<reply_ptr> command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  reply_ptr r(static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data())));
  if (!r) {
    return load_error(fmt::format("{}: {}", args[0], c->errstr));
  }
  if (r->type == REDIS_REPLY_ERROR) {
    return load_error(fmt::format("{}: {}", args[0], std::string(r->str, r->len)));
  }
  return r;
}

class redis_producer final : public producer_driver {
 public:
  redis_producer(context_ptr c, const std::vector<std::string>& keys) : c_(std::move(c)), keys_(keys) {}

  rill::expected<void> send(std::uint32_t unit, std::span<const bench_message> batch) override {
    const auto& stream = keys_[unit];
    for (const auto& m : batch) {
      int rc = 0;
      if (m.key.empty()) {
        rc = redisAppendCommand(c_.get(), "XADD %b * v %b", stream.data(), stream.size(), m.value.data(),
                                m.value.size());
      } else {
        rc = redisAppendCommand(c_.get(), "XADD %b * k %b v %b", stream.data(), stream.size(), m.key.data(),
                                m.key.size(), m.value.data(), m.value.size());
      }
      if (rc != REDIS_OK) {
        return load_error(fmt::format("XADD {}: {}", stream, c_->errstr));
      }
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      void* raw = nullptr;
      if (redisGetReply(c_.get(), &raw) != REDIS_OK) {
        return load_error(fmt::format("XADD {}: {}", stream, c_->errstr));
      }
      reply_ptr r(static_cast<redisReply*>(raw));
      if (r->type == REDIS_REPLY_ERROR) {
        return load_error(fmt::format("XADD {}: {}", stream, std::string(r->str, r->len)));
      }
    }
    return {};
  }

 private:
  context_ptr c_;
  const std::vector<std::string>& keys_;
};

class redis_consumer final : public consumer_driver {
 public:
  redis_consumer(context_ptr c, std::vector<std::string> keys, std::uint32_t fetch)
      : c_(std::move(c)), keys_(std::move(keys)), last_(keys_.size(), "0-0"), fetch_(fetch) {}

  rill::expected<std::size_t> poll(const on_message& on) override {
    std::vector<std::string> args{"XREAD", "COUNT", std::to_string(fetch_)};
    if (keys_.size() == 1) {
      args.insert(args.end(), {"BLOCK", "100"});
    }
    args.emplace_back("STREAMS");
    args.insert(args.end(), keys_.begin(), keys_.end());
    args.insert(args.end(), last_.begin(), last_.end());
    RILL_TRY(r, command(c_.get(), args));
    std::size_t n = 0;
    if (r->type == REDIS_REPLY_NIL) {
      if (keys_.size() > 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      return n;
    }
    // [[key, [[id, [field, value, ...]], ...]], ...]
    for (std::size_t s = 0; s < r->elements; ++s) {
      const auto* stream = r->element[s];
      const std::string key(stream->element[0]->str, stream->element[0]->len);
      const auto* entries = stream->element[1];
      std::size_t k = 0;
      while (k < keys_.size() && keys_[k] != key) {
        ++k;
      }
      if (k == keys_.size()) {
        return load_error(fmt::format("XREAD returned an unknown stream {}", key));
      }
      for (std::size_t e = 0; e < entries->elements; ++e) {
        const auto* entry = entries->element[e];
        last_[k].assign(entry->element[0]->str, entry->element[0]->len);
        const auto* fields = entry->element[1];
        for (std::size_t f = 0; f + 1 < fields->elements; f += 2) {
          if (fields->element[f]->len == 1 && fields->element[f]->str[0] == 'v') {
            on(std::span(reinterpret_cast<const std::byte*>(fields->element[f + 1]->str), fields->element[f + 1]->len));
          }
        }
        ++n;
      }
    }
    return n;
  }

 private:
  context_ptr c_;
  std::vector<std::string> keys_;
  std::vector<std::string> last_;  // the last id read per key
  std::uint32_t fetch_;
};

class redis_system final : public system_driver {
 public:
  explicit redis_system(const load_options& o) : o_(o) {
    for (std::uint32_t s = 0; s < o.streams; ++s) {
      for (std::uint32_t p = 0; p < o.partitions; ++p) {
        keys_.push_back(fmt::format("{}:{}:{}", o.name_prefix, s, p));
      }
    }
  }

  std::string name() const override { return "redis"; }

  std::string settings() const override {
    return fmt::format("Redis Streams: appendonly {}, appendfsync {}; a pipeline of {} XADDs per producer", appendonly_,
                       appendfsync_, o_.batch);
  }

  rill::expected<void> setup() override {
    if (!o_.group.empty()) {
      return load_error("--group: consumer groups are measured on rill only");
    }
    if (o_.compression != "none") {
      return load_error("--compression: Redis Streams are compared uncompressed; use none");
    }
    RILL_TRY(c, connect(o_));
    admin_ = std::move(c);
    RILL_TRY(ao, config_get("appendonly"));
    RILL_TRY(af, config_get("appendfsync"));
    appendonly_ = ao;
    appendfsync_ = af;
    const std::string want = o_.sync == "before-ack" ? "always" : "everysec";
    if (appendonly_ != "yes" || appendfsync_ != want) {
      return load_error(
          fmt::format("--sync {} needs the server at appendonly yes, appendfsync {}; it runs "
                      "appendonly {}, appendfsync {}",
                      o_.sync, want, appendonly_, appendfsync_));
    }
    for (const auto& k : keys_) {
      RILL_TRY(r, command(admin_.get(), {"EXISTS", k}));
      if (r->integer != 0) {
        return load_error(fmt::format("key {} exists (a kept run's stream? delete it or pass --name-prefix)", k));
      }
    }
    created_ = true;
    return {};
  }

  rill::expected<void> teardown() override {
    if (created_) {
      std::vector<std::string> args{"DEL"};
      args.insert(args.end(), keys_.begin(), keys_.end());
      RILL_TRY_VOID(command(admin_.get(), args));
      created_ = false;
    }
    return {};
  }

  rill::expected<std::unique_ptr<producer_driver>> make_producer(std::uint32_t) override {
    RILL_TRY(c, connect(o_));
    return std::unique_ptr<producer_driver>(new redis_producer(std::move(c), keys_));
  }

  rill::expected<std::unique_ptr<consumer_driver>> make_consumer(std::uint32_t,
                                                                 std::vector<std::uint32_t> units) override {
    RILL_TRY(c, connect(o_));
    std::vector<std::string> keys;
    for (const auto u : units) {
      keys.push_back(keys_[u]);
    }
    return std::unique_ptr<consumer_driver>(new redis_consumer(std::move(c), std::move(keys), o_.fetch));
  }

 private:
  rill::expected<std::string> config_get(const std::string& key) {
    RILL_TRY(r, command(admin_.get(), {"CONFIG", "GET", key}));
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
      return load_error(fmt::format("CONFIG GET {}: unexpected reply", key));
    }
    return std::string(r->element[1]->str, r->element[1]->len);
  }

  const load_options& o_;
  std::vector<std::string> keys_;
  context_ptr admin_;
  std::string appendonly_;
  std::string appendfsync_;
  bool created_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"redis-bench: the rill-bench load modes against Redis Streams"};
  app.require_subcommand(1);
  load_options o;
  const load_commands commands(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  redis_system system(o);
  return run_load(*commands.chosen(), o, system);
}
