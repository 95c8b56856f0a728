#pragma once
// load: the load generator behind `rill-bench produce | consume | produce-consume` and the peer clients under
// bench/peers (NATS JetStream, Redis Streams). One harness drives every system through a small driver interface, so
// the same threads, pacing, clocks and histograms measure rill and its peers.
//
// A run has `units` = streams x partitions places to write (a rill partition, a NATS subject, a Redis stream key).
//   produce          producer threads send batches for warm-up + duration (or until --messages are acknowledged)
//   consume          producers first fill the units (not measured), then consumer threads read all of it back
//   produce-consume  both at once; every message carries its send time, and the consumer records the end-to-end
//                    latency of each message (send to receipt)
//
// Contracts:
// - A producer sends one batch of --batch messages and waits until the system acknowledged all of them before the
//   next (one request in flight per producer: a rill produce request, a Redis pipeline of --batch XADDs, --batch
//   NATS async publishes followed by a wait for their acks). Produce latency is per batch, from the time the batch
//   was due (its slot in the --rate schedule, or when the previous one finished) to its last ack, so a system that
//   falls behind the schedule is charged for the wait (no coordinated omission).
// - Consumers are assigned units round robin (unit u to consumer u % consumers) and read each from its start; a
//   run fails if consumers have not received every acknowledged message within drain_timeout_s after the producers
//   stop (a lost message is an error, not a lower figure).
// - Every value is counted in a base/histogram (no sampling); throughput counts message values and keys, MB = 10^6
//   bytes.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"

namespace CLI {
class App;
}

namespace rill::bench {

enum class load_mode { produce, consume, produce_consume };

struct load_options {
  std::string server;                        // HOST:PORT of the system under test
  std::uint32_t producers = 1;               // threads, each with its own connection
  std::uint32_t consumers = 1;               // threads, each with its own connection (not used by produce)
  std::uint32_t streams = 1;                 // streams (rill), streams (NATS), key groups (Redis)
  std::uint32_t partitions = 1;              // per stream
  std::uint32_t replication_factor = 0;      // rill: of the topics it creates (0: the server's default)
  std::size_t message_size = 1024;           // value bytes
  std::uint32_t batch = 100;                 // messages per produce request / pipeline
  std::uint32_t fetch = 1000;                // messages per poll / fetch / XREAD
  double duration_s = 10;                    // measured time after warm-up (when messages == 0)
  std::uint64_t messages = 0;                // total messages to produce instead of a duration (0: use the duration)
  double rate = 0;                           // messages per second over all producers; 0: as fast as acks allow
  double warmup_s = 0;                       // produced but not counted
  std::string sync = "before-ack";           // before-ack | none (what that means per system: the driver's settings())
  std::string compression = "none";          // none | zstd (rill only)
  std::string group;                         // consumers are members of this consumer group (rill only)
  std::string partitioning = "fixed";        // fixed (producer i -> its units i, i + P, ...) | round-robin | key
  std::uint32_t keys = 0;                    // distinct keys per message (0: no keys; needed by partitioning key)
  std::string key_distribution = "uniform";  // uniform | zipf (s = 1)
  std::string name_prefix = "rill-bench";    // of the streams / subjects / keys the run creates
  bool keep = false;                         // leave what the run created in place
  bool json = false;                         // one JSON object on stdout instead of the text summary
  std::string output;                        // CSV of per-second throughput and latency
  double drain_timeout_s = 30;               // consumers' time to catch up after the producers stop

  [[nodiscard]] std::uint32_t units() const noexcept { return streams * partitions; }
};

// Registers the options every mode and every system shares (the command-line shape scripts rely on).
void add_load_options(CLI::App& app, load_options& o, load_mode mode);

// The three subcommands (produce, consume, produce-consume), each with add_load_options, on `app`; after parsing,
// chosen() is the mode whose subcommand was given, if any.
class load_commands {
 public:
  load_commands(CLI::App& app, load_options& o);
  [[nodiscard]] std::optional<load_mode> chosen() const;

 private:
  CLI::App* produce_;
  CLI::App* consume_;
  CLI::App* both_;
};

// The unit (stream x partition) batch `k` of producer `producer` goes to, without keys: round-robin, every unit in
// turn from unit `producer`; fixed, the units producer i owns (i, i + producers, i + 2 producers, ...) in turn, so
// every unit is written even by fewer producers than units (one producer and 3 partitions writes all three; with as
// many producers as units or more, producer i writes unit i % units only). Requires producer < o.producers and at
// least one unit; always returns a unit < o.units().
std::uint32_t unit_of_batch(const load_options& o, std::uint32_t producer, std::uint64_t k);

// Checks the combination (e.g. consumers <= units, message_size >= 8 for end-to-end timestamps); the error names
// the option and its allowed range.
expected<void> check_options(const load_options& o, load_mode mode);

struct bench_message {
  std::string_view key;  // empty: no key
  std::span<const std::byte> value;
};

// One producer connection. send() returns once every message of `batch` is acknowledged by the system, at the
// durability the run was set up with.
class producer_driver {
 public:
  virtual ~producer_driver() = default;
  virtual expected<void> send(std::uint32_t unit, std::span<const bench_message> batch) = 0;
};

// One consumer connection, reading its units from their start. poll() calls `on` for each message received and
// returns how many; 0 when nothing arrived within a short wait (about 100 ms).
class consumer_driver {
 public:
  virtual ~consumer_driver() = default;
  using on_message = std::function<void(std::span<const std::byte> value)>;
  virtual expected<std::size_t> poll(const on_message& on) = 0;
  // Where this consumer stands in each of its units (for the error of a run whose consumers fall short).
  [[nodiscard]] virtual std::string positions() const { return {}; }
};

// One system under test.
class system_driver {
 public:
  virtual ~system_driver() = default;
  [[nodiscard]] virtual std::string name() const = 0;
  // What the run's durability and batching mean on this system, in words (printed with every result).
  [[nodiscard]] virtual std::string settings() const = 0;
  // Creates the units (refusing ones that already exist), and removes them again.
  virtual expected<void> setup() = 0;
  virtual expected<void> teardown() = 0;
  virtual expected<std::unique_ptr<producer_driver>> make_producer(std::uint32_t index) = 0;
  virtual expected<std::unique_ptr<consumer_driver>> make_consumer(std::uint32_t index,
                                                                   std::vector<std::uint32_t> units) = 0;
};

// Runs one mode against `system` (set up before, torn down after unless options.keep or the run failed: what a
// failed run wrote is left for inspection); prints the summary (or JSON) on stdout and writes the CSV. Returns the
// process exit code: 0, or 1 after printing the error.
int run_load(load_mode mode, const load_options& options, system_driver& system);

// An error of the benchmark harness or a driver (the detail says what failed).
rill::unexpected load_error(std::string detail);

[[nodiscard]] std::string_view to_string(load_mode m) noexcept;

}  // namespace rill::bench
