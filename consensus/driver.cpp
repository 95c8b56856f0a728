#include "consensus/driver.h"

#include <fmt/core.h>

#include "base/assert.h"
#include "storage/errc.h"

namespace rill::consensus {

driver::driver(const replica_options& options, state_machine& sm, recovered_state recovered, group_storage& storage,
               transport* net, driver_hooks hooks, replica_bugs bugs)
    : storage_(&storage), net_(net), hooks_(std::move(hooks)), fence_on_read_error_(options.replica_count == 1) {
  RILL_ASSERT(net_ != nullptr || options.replica_count == 1, "a group of {} replicas needs a transport",
              options.replica_count);
  replica_ = std::make_unique<class replica>(options, sm, std::move(recovered), bugs);
}

driver::~driver() {
  *alive_ = false;
}

void driver::on_message(const message& m) {
  if (fenced_ || halted_) {
    return;
  }
  if (m.h.cmd == command::prepare && hooks_.prepare) {
    hooks_.prepare(m);
  }
  std::vector<effect> out;
  replica_->on_message(m, out);
  run(out);
  changed();
}

void driver::on_tick() {
  if (fenced_ || halted_) {
    return;
  }
  std::vector<effect> out;
  replica_->on_tick(out);
  run(out);
  changed();
}

void driver::hand_over(view_t target) {
  if (fenced_ || halted_) {
    return;
  }
  std::vector<effect> out;
  replica_->hand_over(target, out);
  run(out);
  changed();
}

void driver::changed() {
  if (fenced_ || halted_) {
    return;
  }
  storage_->replica_changed(*replica_);
  // What storage cut after it was written: no longer durable here (repair writes it again if the log still wants it).
  for (const auto& [op, checksum] : storage_->take_cut()) {
    if (fenced_ || halted_) {
      return;
    }
    std::vector<effect> next;
    replica_->on_write_done(op, checksum, false, next);
    run(next);
  }
}

void driver::poke() {
  if (!fenced_ && !halted_) {
    release_checkpoint();
  }
}

task<void> driver::settle() {
  while (in_flight_ > 0) {
    idle_.reset();
    co_await idle_.wait();
  }
}

void driver::run(std::vector<effect>& effects) {
  for (auto& e : effects) {
    if (fenced_ || halted_) {
      break;  // nothing after a fence is executed: a send or reply could advertise what storage refused
    }
    execute(e);
  }
  effects.clear();
  if (!fenced_ && !halted_) {
    release_checkpoint();
  }
}

template <class T, class F>
std::function<void(T)> driver::completion(F f) {
  started();
  return [this, alive = alive_, f = std::move(f)](T result) mutable {
    if (!*alive) {
      return;  // the driver is gone (a simulated crash): nothing of it may run
    }
    if (!fenced_ && !halted_) {
      f(std::move(result));
    }
    completed();  // last: it may resume a settle() waiter, which must see what this completion caused
  };
}

void driver::execute(effect& e) {
  if (auto* s = std::get_if<send_effect>(&e)) {
    RILL_ASSERT(net_ != nullptr, "a one-replica group has nobody to send to");
    net_->send(s->to, std::move(s->m));
  } else if (auto* rep = std::get_if<reply_effect>(&e)) {
    if (hooks_.reply) {
      hooks_.reply(std::move(rep->m));
    }
  } else if (auto* w = std::get_if<write_effect>(&e)) {
    RILL_ASSERT(w->m.h.cmd == command::prepare);
    if (hooks_.prepare) {
      hooks_.prepare(w->m);
    }
    const std::uint64_t op = w->m.h.op;
    const checksum_t checksum = w->m.h.checksum;
    if (hooks_.writing) {
      hooks_.writing(op);
    }
    storage_->write(std::move(w->m), completion<expected<void>>([this, op, checksum](expected<void> r) {
                      std::vector<effect> next;
                      if (!r && r.error().code() == make_error_code(storage::errc::superseded)) {
                        // Given up before it landed (the replica moved on): not written, and nothing failed.
                        replica_->on_write_done(op, checksum, false, next);
                        run(next);
                        changed();
                        return;
                      }
                      if (!r) {
                        fence(std::move(r.error()));
                        return;
                      }
                      if (hooks_.written) {
                        hooks_.written(op, checksum);
                      }
                      replica_->on_write_done(op, checksum, true, next);
                      run(next);
                      changed();
                    }));
  } else if (auto* rd = std::get_if<read_effect>(&e)) {
    const std::uint64_t op = rd->op;
    const checksum_t checksum = rd->checksum;
    storage_->read(op, checksum, completion<expected<message>>([this, op, checksum](expected<message> r) {
                     if (!r && fence_on_read_error_ && r.error().code() != make_error_code(storage::errc::removed)) {
                       fence(error(make_error_code(storage::errc::corrupt_data),
                                   fmt::format("reading op {} back from the journal: {}", op, r.error().message())));
                       return;
                     }
                     if (r && hooks_.prepare) {
                       hooks_.prepare(*r);
                     }
                     std::vector<effect> next;
                     // (errc::removed: storage no longer keeps it by design, below the durable checkpoint)
                     const bool removed = !r && r.error().code() == make_error_code(storage::errc::removed);
                     replica_->on_read_done(op, checksum, r ? &*r : nullptr, next, removed);
                     run(next);
                     changed();
                   }));
  } else if (auto* p = std::get_if<persist_effect>(&e)) {
    auto state = std::make_shared<vsr_state>(std::move(p->state));
    storage_->persist(*state, completion<expected<void>>([this, state](expected<void> r) {
      if (!r) {
        fence(std::move(r.error()));
        return;
      }
      if (hooks_.persisted) {
        hooks_.persisted(*state);
      }
      std::vector<effect> next;
      replica_->on_persist_done(*state, next);
      run(next);
      changed();
    }));
  } else if (auto* c = std::get_if<checkpoint_effect>(&e)) {
    RILL_ASSERT(!held_checkpoint_, "a checkpoint at op {} while the one at op {} is held", c->at.op,
                held_checkpoint_->at.op);
    held_checkpoint_ = std::move(*c);  // written now, or once the gate reaches it (run() releases it)
  } else if (auto* in = std::get_if<installed_effect>(&e)) {
    storage_->installed(in->at);
    if (hooks_.installed) {
      hooks_.installed(in->at);
    }
  } else if (auto* a = std::get_if<applied_effect>(&e)) {
    storage_->applied(a->prepare);
    if (hooks_.applied) {
      hooks_.applied(a->prepare);
    }
  }
}

void driver::release_checkpoint() {
  if (!held_checkpoint_) {
    return;
  }
  if (storage_->durable_through() < held_checkpoint_->at.op) {
    return;
  }
  if (hooks_.checkpoint_gate && hooks_.checkpoint_gate() < held_checkpoint_->at.op) {
    return;
  }
  checkpoint_effect c = std::move(*held_checkpoint_);
  held_checkpoint_.reset();
  const std::uint8_t slot = c.slot;
  const std::uint64_t op = c.at.op;
  storage_->write_checkpoint(slot, op, std::move(c.bytes),
                             completion<expected<void>>([this, slot, op](expected<void> r) {
                               if (!r) {
                                 fence(std::move(r.error()));
                                 return;
                               }
                               if (hooks_.checkpointed) {
                                 hooks_.checkpointed(slot, op);
                               }
                               std::vector<effect> next;
                               replica_->on_checkpoint_done(slot, op, true, next);
                               run(next);
                               changed();
                             }));
}

void driver::fence(error e) {
  if (fenced_) {
    return;
  }
  fenced_ = std::move(e);
  held_checkpoint_.reset();
  if (hooks_.fenced) {
    hooks_.fenced(*fenced_);
  }
}

void driver::started() {
  ++in_flight_;
}

void driver::completed() {
  RILL_ASSERT(in_flight_ > 0, "a storage completion with nothing in flight");
  if (--in_flight_ == 0) {
    idle_.set();
  }
}

}  // namespace rill::consensus
