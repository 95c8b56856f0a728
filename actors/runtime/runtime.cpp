#include "actors/runtime/runtime.h"

#include <algorithm>

#include <caf/all.hpp>

#include "actors/runtime/shard_policy.hpp"
#include "base/assert.h"

namespace rill::actors {

shard_set*& pending_shard_set() noexcept {
  static shard_set* set = nullptr;
  return set;
}

namespace {
std::uint64_t open_files_per_shard(const runtime_options& o) {
  if (o.open_files_max == 0) {
    return storage::file_cache::files_unlimited;
  }
  return std::max<std::uint64_t>(1, o.open_files_max / o.cpus.size());
}
}  // namespace

struct runtime::impl {
  shard_set shards;
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
};

runtime::runtime(runtime_options options) : impl_(std::make_unique<impl>()) {
  RILL_ASSERT(!options.cpus.empty(), "a runtime needs at least one shard");
  for (std::size_t i = 0; i < options.cpus.size(); ++i) {
    impl_->shards.shards.push_back(std::make_unique<shard>(i, options.cpus[i], open_files_per_shard(options)));
  }
  impl_->shards.pin = options.pin;
  impl_->shards.inline_syncs = options.inline_syncs;
  impl_->config.set("scheduler.max-threads", options.cpus.size());
  impl_->config.set("scheduler.max-throughput", options.max_throughput);
  impl_->config.set("logger.verbosity", caf::atom("quiet"));
  impl_->config.template load<caf::scheduler::coordinator<shard_policy>>();
  // The coordinator picks the shards up while the system is constructed (one runtime is built at a time).
  static std::mutex construction;
  std::lock_guard<std::mutex> guard(construction);
  pending_shard_set() = &impl_->shards;
  impl_->system = std::make_unique<caf::actor_system>(impl_->config);
  pending_shard_set() = nullptr;
}

runtime::~runtime() {
  impl_->system.reset();  // joins the workers
}

caf::actor_system& runtime::system() noexcept {
  return *impl_->system;
}
std::size_t runtime::shard_count() const noexcept {
  return impl_->shards.shards.size();
}
shard& runtime::shard_at(std::size_t index) noexcept {
  return *impl_->shards.shards.at(index);
}

}  // namespace rill::actors
