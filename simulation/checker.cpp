#include "simulation/checker.h"

#include <fmt/core.h>
#include <fmt/format.h>

#include "net/proto/coordinator.pb.h"

namespace rill::simulation {

using consensus::command;

namespace {
std::string describe(payload_id p, std::uint32_t index) {
  return fmt::format("{}/{}#{}", p.client, p.sequence, index);
}
}  // namespace

void checker::fail(std::uint64_t tick, std::string what) {
  ++violations_;
  if (!violation_) {
    violation_ = fmt::format("tick {}: {}", tick, what);
  }
}

void checker::on_applied(std::uint64_t tick, consensus::replica_t r, const consensus::header& h, payload_id payload,
                         std::uint64_t digest) {
  replica_track& t = replicas_.at(r);
  if (h.op != t.applied + 1) {
    fail(tick, fmt::format("replica {} applied op {} after op {}", r, h.op, t.applied));
  }
  t.applied = h.op;
  auto [it, first] = canonical_.emplace(h.op, h.checksum);
  if (!first && it->second != h.checksum) {
    fail(tick, fmt::format("replica {} applied op {} as {}, the canonical history has {}", r, h.op,
                           consensus::to_string(h.checksum), consensus::to_string(it->second)));
  }
  auto [d, new_digest] = digests_.emplace(h.op, digest);
  if (!new_digest && d->second != digest) {
    fail(tick, fmt::format("replica {} state after op {} differs from the first replica's to apply it", r, h.op));
  }
  if (first && h.operation >= consensus::operation_user_min && payload.client != 0) {
    auto [p, fresh] = payload_op_.emplace(payload, h.op);
    if (!fresh) {
      fail(tick, fmt::format("payload {}/{} executed twice: ops {} and {}", payload.client, payload.sequence, p->second,
                             h.op));
    }
  }
}

void checker::on_restart(consensus::replica_t r) {
  replica_track& t = replicas_.at(r);
  t.applied = 0;
  t.view = 0;
  t.commit_max = 0;
}

void checker::on_wiped(consensus::replica_t r) {
  replica_track& t = replicas_.at(r);
  t.durable_known = false;  // its durable promises went with the disk: the recovery rule stands in for them
  t.durable = {};
  t.journal_durable.clear();  // (and its journal's: a prepare_ok it sends now must rest on a write after the loss)
}

void checker::on_installed(std::uint64_t tick, consensus::replica_t r, const consensus::header& at,
                           std::uint64_t digest) {
  replica_track& t = replicas_.at(r);
  if (at.op <= t.applied) {
    fail(tick, fmt::format("replica {} installed a checkpoint of op {} having applied up to {}", r, at.op, t.applied));
  }
  auto it = canonical_.find(at.op);
  if (it == canonical_.end() || it->second != at.checksum) {
    fail(tick, fmt::format("replica {} installed a checkpoint of op {} {}, not of the canonical history", r, at.op,
                           consensus::to_string(at.checksum)));
  } else if (digests_.at(at.op) != digest) {
    fail(tick, fmt::format("replica {} restored a state at op {} that differs from the canonical one (digest {:x}, "
                           "canonical {:x})",
                           r, at.op, digest, digests_.at(at.op)));
  }
  t.applied = at.op;
}

void checker::on_persisted(std::uint64_t tick, consensus::replica_t r, const consensus::vsr_state& s) {
  replica_track& t = replicas_.at(r);
  if (t.durable_known) {
    if (s.checkpoint.op() < t.durable.checkpoint.op()) {
      fail(tick, fmt::format("replica {} persisted checkpoint {} after checkpoint {}", r, s.checkpoint.op(),
                             t.durable.checkpoint.op()));
    }
    if (s.view < t.durable.view || s.log_view < t.durable.log_view || s.commit < t.durable.commit) {
      fail(tick, fmt::format("replica {} persisted view {} log view {} commit {} after view {} log view {} commit {}",
                             r, s.view.value(), s.log_view.value(), s.commit.value(), t.durable.view.value(),
                             t.durable.log_view.value(), t.durable.commit.value()));
    }
  }
  t.durable = s;
  t.durable_known = true;
}

void checker::on_write_submitted(consensus::replica_t r, std::uint64_t op) {
  replicas_.at(r).journal_durable.erase(op);
}

void checker::on_write_done(consensus::replica_t r, std::uint64_t op, consensus::checksum_t checksum, bool ok) {
  replica_track& t = replicas_.at(r);
  if (ok) {
    t.journal_durable[op] = checksum;
  } else {
    t.journal_durable.erase(op);
  }
}

void checker::on_recovered(consensus::replica_t r, const std::vector<consensus::header>& journal) {
  replica_track& t = replicas_.at(r);
  t.journal_durable.clear();
  for (const auto& h : journal) {
    t.journal_durable[h.op] = h.checksum;
  }
}

void checker::on_sent(std::uint64_t tick, consensus::replica_t r, const consensus::message& m) {
  const replica_track& t = replicas_.at(r);
  if (t.durable_known && t.durable.recovering &&
      (m.h.cmd == command::prepare_ok || m.h.cmd == command::start_view_change || m.h.cmd == command::do_view_change)) {
    fail(tick, fmt::format("replica {} sent {} in view {} while recovering from a lost disk (it votes and "
                           "acknowledges nothing until it has caught up)",
                           r, consensus::to_string(m.h.cmd), m.h.view));
  }
  if (check_ack_durable_ && m.h.cmd == command::prepare_ok) {
    auto it = t.journal_durable.find(m.h.op);
    if (it == t.journal_durable.end() || it->second != m.h.context) {
      fail(tick, fmt::format("replica {} sent prepare_ok for op {} {} that its journal does not hold durably", r,
                             m.h.op, consensus::to_string(m.h.context)));
    }
  }
  if (!t.durable_known || m.h.cmd == command::start_view_change || m.h.cmd == command::request_start_view ||
      m.h.cmd == command::prepare) {
    return;  // votes and requests propose a view; a prepare carries the view it was made in
  }
  if (m.h.view > t.durable.view.value() ||
      (m.h.cmd == command::start_view && m.h.log_view > t.durable.log_view.value()) ||
      (m.h.cmd == command::do_view_change && m.h.log_view > t.durable.log_view.value())) {
    fail(tick, fmt::format("replica {} sent {} in view {} (log view {}) with view {} (log view {}) durable", r,
                           consensus::to_string(m.h.cmd), m.h.view, m.h.log_view, t.durable.view.value(),
                           t.durable.log_view.value()));
  }
}

void checker::on_coordinator_ack(std::uint64_t tick, std::uint64_t client, const client_ack& ack) {
  proto::CoordinatorCommand c;
  auto reply = actors::group_machine::decode_reply(ack.coordinator_reply);
  if (!reply || !c.ParseFromArray(ack.coordinator_command.data(), static_cast<int>(ack.coordinator_command.size()))) {
    fail(tick, fmt::format("client {} got a coordinator reply at op {} that does not parse", client, ack.op));
    return;
  }
  if (reply->status() != 0) {
    return;
  }
  const std::string& group = c.group();
  if (c.has_join() || c.has_heartbeat()) {
    // No two members are told they own one partition in one generation.
    for (const auto p : reply->owned()) {
      auto [it, fresh] = group_owner_.emplace(std::tuple{group, reply->generation(), p}, reply->member_id());
      if (!fresh && it->second != reply->member_id()) {
        fail(tick, fmt::format("group {:?}: partition {} of generation {} was given to {} and to {}", group, p,
                               reply->generation(), it->second, reply->member_id()));
      }
    }
  }
  if (c.has_commit()) {
    ++group_commits_;
    for (const auto& po : c.commit().offsets()) {
      // A commit lands only for the partition's owner in the generation it names (never a zombie's).
      auto owner = group_owner_.find(std::tuple{group, c.commit().generation(), po.partition()});
      if (owner != group_owner_.end() && owner->second != c.commit().member_id()) {
        fail(tick, fmt::format("group {:?}: {} committed partition {} in generation {}, which {} owns", group,
                               c.commit().member_id(), po.partition(), c.commit().generation(), owner->second));
      }
      // Committed offsets never go back: in op order, each accepted commit is at or above the one before.
      auto& by_op = group_commits_by_op_[{group, po.partition()}];
      by_op[ack.op] = po.offset();
      auto at = by_op.find(ack.op);
      if ((at != by_op.begin() && std::prev(at)->second > po.offset()) ||
          (std::next(at) != by_op.end() && std::next(at)->second < po.offset())) {
        fail(tick, fmt::format("group {:?}: partition {}'s committed offset went back around op {}", group,
                               po.partition(), ack.op));
      }
    }
  }
}

void checker::on_ack(std::uint64_t tick, std::uint64_t client, const client_ack& ack) {
  if (ack.what == client_ack::kind::coordinator) {
    auto it = canonical_.find(ack.op);
    if (it == canonical_.end() || it->second != ack.prepare_checksum) {
      fail(tick, fmt::format("client {} was answered a coordinator command at op {}, not the canonical op there",
                             client, ack.op));
    }
    on_coordinator_ack(tick, client, ack);
    return;
  }
  if (ack.what == client_ack::kind::metadata) {
    auto it = canonical_.find(ack.op);
    if (it == canonical_.end() || it->second != ack.prepare_checksum) {
      fail(tick, fmt::format("client {} was answered a metadata change at op {}, not the canonical op there", client,
                             ack.op));
    }
    return;
  }
  if (ack.what == client_ack::kind::consumer_offset) {
    auto [pos, fresh] = consumer_positions_.emplace(client, ack.base_offset);
    if (!fresh && ack.base_offset < pos->second) {
      fail(tick, fmt::format("client {}'s stored consumer position went back from {} to {}", client, pos->second,
                             ack.base_offset));
    }
    pos->second = std::max(pos->second, ack.base_offset);
    return;
  }
  if (ack.verdict != storage::producer_verdict::fresh && ack.verdict != storage::producer_verdict::duplicate) {
    fail(tick, fmt::format("client {} payload {} was refused ({}): its producer keeps the rules, so its state was "
                           "lost or wrong",
                           client, ack.payload.sequence, storage::to_string(ack.verdict)));
    return;
  }
  if (ack.verdict == storage::producer_verdict::fresh && ack.batch_op != ack.op) {
    fail(tick, fmt::format("client {} payload {} was stored at op {}, its reply says op {}", client,
                           ack.payload.sequence, ack.op, ack.batch_op));
  }
  for (std::uint32_t i = 0; i < ack.records; ++i) {
    auto o = offsets_.find(ack.base_offset + i);
    if (o == offsets_.end() || !(o->second == record_id{ack.payload, i})) {
      fail(tick, fmt::format("client {} was told offset {} for {}, which the ledger did not give it", client,
                             ack.base_offset + i, describe(ack.payload, i)));
    }
  }
  if (ack.records > 0) {
    acked_offset_end_ = std::max(acked_offset_end_, ack.base_offset + ack.records);
  }
  auto it = canonical_.find(ack.op);
  if (it == canonical_.end()) {
    fail(tick, fmt::format("client {} acknowledged op {}, which no replica has applied", client, ack.op));
    return;
  }
  if (it->second != ack.prepare_checksum) {
    fail(tick, fmt::format("client {} acknowledged op {} as {}, the canonical history has {}", client, ack.op,
                           consensus::to_string(ack.prepare_checksum), consensus::to_string(it->second)));
  }
  auto p = payload_op_.find(ack.payload);
  if (p == payload_op_.end() || p->second != ack.batch_op) {
    fail(tick, fmt::format("client {} payload {} acknowledged as the batch of op {} (answered at op {}), which holds "
                           "another payload",
                           client, ack.payload.sequence, ack.batch_op, ack.op));
  }
  acked_[ack.op] = client;
}

void checker::on_offsets(std::uint64_t tick, consensus::replica_t r, std::uint64_t op, payload_id payload,
                         std::uint64_t base, std::uint32_t records) {
  for (std::uint32_t i = 0; i < records; ++i) {
    const record_id id{payload, i};
    auto [it, fresh] = offsets_.emplace(base + i, id);
    if (!fresh && !(it->second == id)) {
      fail(tick, fmt::format("replica {} gave offset {} (op {}) to {}; it names {}", r, base + i, op,
                             describe(payload, i), describe(it->second.payload, it->second.index)));
    }
  }
  committed_offsets_ = std::max(committed_offsets_, base + records);
}

void checker::on_consumed(std::uint64_t tick, consensus::replica_t r, std::uint64_t offset, payload_id payload,
                          std::uint32_t index) {
  auto it = offsets_.find(offset);
  if (it == offsets_.end()) {
    fail(tick, fmt::format("replica {} showed offset {} ({}), which no committed op was given", r, offset,
                           describe(payload, index)));
  } else if (!(it->second == record_id{payload, index})) {
    fail(tick, fmt::format("replica {} showed {} at offset {}, which names {}", r, describe(payload, index), offset,
                           describe(it->second.payload, it->second.index)));
  }
}

void checker::on_visible(std::uint64_t tick, consensus::replica_t r, std::uint64_t committed) {
  if (committed > committed_offsets_) {
    fail(tick, fmt::format("replica {} shows offsets up to {} to consumers; ops committed so far end at {}", r,
                           committed, committed_offsets_));
  }
}

void checker::check_acks_visible(std::uint64_t tick, consensus::replica_t r, std::uint64_t end) {
  if (acked_offset_end_ > end) {
    fail(tick,
         fmt::format("offsets up to {} were acknowledged; replica {} shows only up to {}", acked_offset_end_, r, end));
  }
}

void checker::on_duplicate(std::uint64_t tick, consensus::replica_t r) {
  fail(tick, fmt::format("replica {} has a payload's batch twice in its log, or executed a request twice (a retried "
                         "produce was not answered by idempotence, or a retried request not by the client table)",
                         r));
}

void checker::on_state(std::uint64_t tick, const consensus::replica& r) {
  replica_track& t = replicas_.at(r.index());
  if (r.view().value() < t.view) {
    fail(tick, fmt::format("replica {} view went back from {} to {}", r.index(), t.view, r.view().value()));
  }
  if (r.commit_max().value() < t.commit_max) {
    fail(tick,
         fmt::format("replica {} commit went back from {} to {}", r.index(), t.commit_max, r.commit_max().value()));
  }
  if (r.log_view() > r.view()) {
    fail(tick,
         fmt::format("replica {} log view {} above its view {}", r.index(), r.log_view().value(), r.view().value()));
  }
  t.view = r.view().value();
  t.commit_max = r.commit_max().value();
}

void checker::check_acks_applied(std::uint64_t tick, const std::vector<const consensus::replica*>& replicas) {
  for (const auto& [op, client] : acked_) {
    for (const consensus::replica* r : replicas) {
      if (r->commit_min().value() < op) {
        fail(tick, fmt::format("op {} acknowledged to client {} is not applied on replica {} (applied up to {})", op,
                               client, r->index(), r->commit_min().value()));
        return;
      }
    }
  }
}

}  // namespace rill::simulation
