#include "actors/runtime/actor_io.hpp"

#include "base/assert.h"

namespace rill::actors {

actor_io::actor_io(caf::local_actor* owner) : owner_(owner->ctrl()), shard_(current_shard()) {
  RILL_ASSERT(shard_ != nullptr, "actor_io must be created on a shard thread");
}

void actor_io::submit(storage::io::request& r) {
  RILL_ASSERT(current_shard() == shard_, "actor_io used off its shard");
  r.router = this;
  ++in_flight_;
  shard_->engine().submit(r);
}

std::size_t actor_io::poll(bool) {
  RILL_UNREACHABLE("actor_io is driven by its shard; storage code never polls it");
}

void actor_io::route(storage::io::request& r) {
  if (auto strong = owner_.lock()) {
    caf::anon_send(caf::actor_cast<caf::actor>(strong), io_done_atom::value,
                   static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&r)));
  }
}

void actor_io::deliver(storage::io::request& r) {
  RILL_ASSERT(in_flight_ > 0);
  --in_flight_;
  r.router = nullptr;
  r.on_complete(r);
}

void io_completion::operator()(io_done_atom, std::uint64_t request) const {
  io->deliver(*reinterpret_cast<storage::io::request*>(static_cast<std::uintptr_t>(request)));
}

}  // namespace rill::actors
