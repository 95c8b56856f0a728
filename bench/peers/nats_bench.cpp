// nats-bench: the load harness (tools/load) driving NATS JetStream through Debian's libnats (the C client), so that
// bench/compare measures NATS with the same threads, pacing and histograms as rill-bench.
//
//   nats-bench produce|consume|produce-consume --server HOST:PORT ... (the options of rill-bench's load modes)
//
// Units: stream `<PREFIX>_<s>` (file storage, one replica) with subjects `<prefix>.<s>.*`; unit u is subject
// `<prefix>.<s>.<p>`. A producer publishes its batch with js_PublishAsync (up to --batch in flight) and then waits
// for every ack (js_PublishAsyncComplete): one batch in flight, as with rill. A key travels as a message header.
// Consumers read each unit through a pull consumer (deliver all, ack none) with Fetch(--fetch).
//
// Durability: Debian's nats-server 2.9 writes each message to its file store before acknowledging it but does not
// fsync it (it syncs every sync_interval, two minutes by default); it has no way to fsync before each ack, so
// --sync before-ack is refused and --sync none is what NATS JetStream is compared at.
#include <nats/nats.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "tools/load/load.h"

namespace {

using namespace rill;
using namespace rill::bench;

std::string status_text(natsStatus s, jsErrCode code = static_cast<jsErrCode>(0)) {
  return code != 0 ? fmt::format("{} (JetStream error {})", natsStatus_GetText(s), static_cast<int>(code))
                   : std::string(natsStatus_GetText(s));
}

std::string upper_name(std::string s) {
  for (auto& c : s) {
    c = (c == '-' || c == '.') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return s;
}

struct connection {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  ~connection() {
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
  }
};

struct async_errors {
  std::atomic<int> count{0};
  std::string first;  // written by the first failing ack only
};

void on_publish_error(jsCtx*, jsPubAckErr* pae, void* closure) {
  auto* e = static_cast<async_errors*>(closure);
  if (e->count++ == 0) {
    e->first =
        fmt::format("{}{}", status_text(pae->Err, pae->ErrCode), pae->ErrText ? fmt::format(": {}", pae->ErrText) : "");
  }
}

rill::expected<std::unique_ptr<connection>> connect(const load_options& o, std::int64_t max_pending,
                                                    async_errors* errors) {
  auto c = std::make_unique<connection>();
  natsOptions* opts = nullptr;
  if (auto s = natsOptions_Create(&opts); s != NATS_OK) {
    return load_error(status_text(s));
  }
  natsOptions_SetURL(opts, fmt::format("nats://{}", o.server).c_str());
  const auto s = natsConnection_Connect(&c->nc, opts);
  natsOptions_Destroy(opts);
  if (s != NATS_OK) {
    return load_error(fmt::format("connect nats://{}: {}", o.server, status_text(s)));
  }
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = 30'000;
  if (max_pending > 0) {
    jo.PublishAsync.MaxPending = max_pending;
    jo.PublishAsync.ErrHandler = on_publish_error;
    jo.PublishAsync.ErrHandlerClosure = errors;
  }
  if (auto js = natsConnection_JetStream(&c->js, c->nc, &jo); js != NATS_OK) {
    return load_error(fmt::format("JetStream context: {}", status_text(js)));
  }
  return c;
}

class nats_producer final : public producer_driver {
 public:
  nats_producer(std::unique_ptr<connection> c, std::unique_ptr<async_errors> e,
                const std::vector<std::string>& subjects)
      : c_(std::move(c)), errors_(std::move(e)), subjects_(subjects) {}

  rill::expected<void> send(std::uint32_t unit, std::span<const bench_message> batch) override {
    const char* subject = subjects_[unit].c_str();
    for (const auto& m : batch) {
      natsStatus s = NATS_OK;
      if (m.key.empty()) {
        s = js_PublishAsync(c_->js, subject, m.value.data(), static_cast<int>(m.value.size()), nullptr);
      } else {
        natsMsg* msg = nullptr;
        s = natsMsg_Create(&msg, subject, nullptr, reinterpret_cast<const char*>(m.value.data()),
                           static_cast<int>(m.value.size()));
        if (s == NATS_OK) {
          s = natsMsgHeader_Set(msg, "key", std::string(m.key).c_str());
        }
        if (s == NATS_OK) {
          s = js_PublishMsgAsync(c_->js, &msg, nullptr);
        }
        natsMsg_Destroy(msg);  // null when the library took it
      }
      if (s != NATS_OK) {
        return load_error(fmt::format("publish to {}: {}", subject, status_text(s)));
      }
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 30'000;
    if (auto s = js_PublishAsyncComplete(c_->js, &po); s != NATS_OK) {
      return load_error(fmt::format("waiting for publish acks: {}", status_text(s)));
    }
    if (errors_->count > 0) {
      return load_error(fmt::format("{} publishes failed; the first: {}", errors_->count.load(), errors_->first));
    }
    return {};
  }

 private:
  std::unique_ptr<connection> c_;
  std::unique_ptr<async_errors> errors_;
  const std::vector<std::string>& subjects_;
};

class nats_consumer final : public consumer_driver {
 public:
  nats_consumer(std::unique_ptr<connection> c, std::uint32_t fetch) : c_(std::move(c)), fetch_(fetch) {}
  ~nats_consumer() override {
    for (auto* s : subs_) {
      natsSubscription_Destroy(s);
    }
  }

  rill::expected<void> subscribe(const std::string& subject) {
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Config.AckPolicy = js_AckNone;
    so.Config.DeliverPolicy = js_DeliverAll;
    natsSubscription* sub = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    // An ephemeral pull consumer per subject (it goes with the stream).
    if (auto s = js_PullSubscribe(&sub, c_->js, subject.c_str(), nullptr, nullptr, &so, &code); s != NATS_OK) {
      return load_error(fmt::format("pull subscribe {}: {}", subject, status_text(s, code)));
    }
    subs_.push_back(sub);
    return {};
  }

  rill::expected<std::size_t> poll(const on_message& on) override {
    std::size_t total = 0;
    // Wait on the only subscription; with several, wait briefly on each in turn.
    const std::int64_t wait_ms = subs_.size() == 1 ? 100 : 5;
    for (auto* sub : subs_) {
      natsMsgList list{};
      jsErrCode code = static_cast<jsErrCode>(0);
      const auto s = natsSubscription_Fetch(&list, sub, static_cast<int>(fetch_), wait_ms, &code);
      if (s == NATS_TIMEOUT) {
        // Fetch returns what arrived before the timeout along with NATS_TIMEOUT only when nothing did.
        natsMsgList_Destroy(&list);
        continue;
      }
      if (s != NATS_OK) {
        natsMsgList_Destroy(&list);
        return load_error(fmt::format("fetch: {}", status_text(s, code)));
      }
      for (int i = 0; i < list.Count; ++i) {
        const auto* data = natsMsg_GetData(list.Msgs[i]);
        on(std::span(reinterpret_cast<const std::byte*>(data),
                     static_cast<std::size_t>(natsMsg_GetDataLength(list.Msgs[i]))));
      }
      total += static_cast<std::size_t>(list.Count);
      natsMsgList_Destroy(&list);
    }
    return total;
  }

 private:
  std::unique_ptr<connection> c_;
  std::uint32_t fetch_;
  std::vector<natsSubscription*> subs_;
};

class nats_system final : public system_driver {
 public:
  explicit nats_system(const load_options& o) : o_(o) {
    for (std::uint32_t s = 0; s < o.streams; ++s) {
      streams_.push_back(fmt::format("{}_{}", upper_name(o.name_prefix), s));
      for (std::uint32_t p = 0; p < o.partitions; ++p) {
        subjects_.push_back(fmt::format("{}.{}.{}", o.name_prefix, s, p));
      }
    }
  }

  std::string name() const override { return "nats"; }

  std::string settings() const override {
    return fmt::format(
        "NATS JetStream: file storage, 1 replica; acknowledged once written to the file store, fsync every "
        "sync_interval (server default 2 min); {} async publishes then a wait for all acks per producer",
        o_.batch);
  }

  rill::expected<void> setup() override {
    if (o_.sync == "before-ack") {
      return load_error("--sync before-ack: nats-server 2.9 cannot fsync before acknowledging; use --sync none");
    }
    if (!o_.group.empty()) {
      return load_error("--group: consumer groups are measured on rill only");
    }
    if (o_.compression != "none") {
      return load_error("--compression: NATS JetStream streams are compared uncompressed; use none");
    }
    RILL_TRY(c, connect(o_, 0, nullptr));
    admin_ = std::move(c);
    for (std::uint32_t s = 0; s < o_.streams; ++s) {
      const auto subjects = fmt::format("{}.{}.*", o_.name_prefix, s);
      const char* list[] = {subjects.c_str()};
      jsStreamConfig cfg;
      jsStreamConfig_Init(&cfg);
      cfg.Name = streams_[s].c_str();
      cfg.Subjects = list;
      cfg.SubjectsLen = 1;
      cfg.Storage = js_FileStorage;
      cfg.Replicas = 1;
      jsStreamInfo* info = nullptr;
      jsErrCode code = static_cast<jsErrCode>(0);
      const auto st = js_AddStream(&info, admin_->js, &cfg, nullptr, &code);
      jsStreamInfo_Destroy(info);
      if (st != NATS_OK) {
        return load_error(fmt::format("create stream {}: {} (a kept run's stream? delete it or pass --name-prefix)",
                                      streams_[s], status_text(st, code)));
      }
      created_.push_back(streams_[s]);
    }
    return {};
  }

  rill::expected<void> teardown() override {
    for (const auto& s : created_) {
      jsErrCode code = static_cast<jsErrCode>(0);
      if (auto st = js_DeleteStream(admin_->js, s.c_str(), nullptr, &code); st != NATS_OK) {
        return load_error(fmt::format("delete stream {}: {}", s, status_text(st, code)));
      }
    }
    created_.clear();
    return {};
  }

  rill::expected<std::unique_ptr<producer_driver>> make_producer(std::uint32_t) override {
    auto errors = std::make_unique<async_errors>();
    RILL_TRY(c, connect(o_, o_.batch, errors.get()));
    return std::unique_ptr<producer_driver>(new nats_producer(std::move(c), std::move(errors), subjects_));
  }

  rill::expected<std::unique_ptr<consumer_driver>> make_consumer(std::uint32_t,
                                                                 std::vector<std::uint32_t> units) override {
    RILL_TRY(c, connect(o_, 0, nullptr));
    auto consumer = std::make_unique<nats_consumer>(std::move(c), o_.fetch);
    for (const auto u : units) {
      RILL_TRY_VOID(consumer->subscribe(subjects_[u]));
    }
    return std::unique_ptr<consumer_driver>(std::move(consumer));
  }

 private:
  const load_options& o_;
  std::vector<std::string> streams_;
  std::vector<std::string> subjects_;
  std::vector<std::string> created_;
  std::unique_ptr<connection> admin_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nats-bench: the rill-bench load modes against NATS JetStream"};
  app.require_subcommand(1);
  load_options o;
  o.sync = "none";
  const load_commands commands(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  nats_system system(o);
  const int rc = run_load(*commands.chosen(), o, system);
  nats_Close();
  return rc;
}
