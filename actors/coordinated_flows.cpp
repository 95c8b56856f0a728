#include "actors/coordinated_flows.h"

#include <fmt/core.h>

#include <utility>

#include "net/status.h"

namespace rill::actors {

task<expected<void>> ensure_coordinated(coordinators& c, const coordinated_group& g) {
  const std::uint32_t index = c.index_for(g.key());
  const group_machine& m = c.machine(index);
  if (const group_state* old = m.find(g.key()); old != nullptr && old->incarnation() != g.id.group_id) {
    // The name's earlier incarnation (deleted, then created again before the primary's reconcile removed it): it
    // goes first, members and offsets with it. Already gone (another node, the reconcile): as good.
    proto::CoordinatorCommand remove =
        remove_command(g.key(), old->incarnation());  // (named: GCC 12 destroys a temporary in a co_await twice)
    RILL_CO_TRY(r, co_await c.submit(index, std::move(remove)));
    if (r.status() != static_cast<std::uint32_t>(net::status::group_not_found)) {
      RILL_CO_TRY_VOID(coordinator_status(r));
    }
  }
  const group_state* state = coordinated_state(m, g);
  if (state != nullptr && partitions_match(*state, g)) {
    co_return expected<void>{};
  }
  proto::CoordinatorCommand needed = state == nullptr ? create_command(g) : resize_command(g);
  RILL_CO_TRY(r, co_await c.submit(index, std::move(needed)));
  // Created meanwhile by another node (or by the primary's reconcile duty): as good.
  if (r.status() != static_cast<std::uint32_t>(net::status::already_exists)) {
    RILL_CO_TRY_VOID(coordinator_status(r));
  }
  co_return expected<void>{};
}

task<expected<coordinated_answer>> coordinate(coordinators& c, const coordinated_group& g, std::uint16_t api,
                                              std::string header, std::uint64_t conn,
                                              std::function<void()> on_session) {
  const std::uint32_t index = c.index_for(g.key());
  if (is_coordinator_read(api)) {
    // A group the metadata created is described as its coordinator has it, created there first if need be (not as
    // "0 partitions" until the primary's reconcile); then the barrier makes the read linearizable.
    RILL_CO_TRY_VOID(co_await ensure_coordinated(c, g));
    RILL_CO_TRY_VOID(co_await c.read_barrier(index));
  }
  RILL_CO_TRY(plan, plan_coordinator_request(g, coordinated_state(c.machine(index), g), api, header, conn));
  coordinated_answer out;
  if (plan.describe) {
    out.describe = true;
    out.offsets_only = plan.offsets_only;
    co_return out;
  }
  if (!plan.command) {
    out.header = std::move(plan.header);
    co_return out;
  }
  RILL_CO_TRY_VOID(co_await ensure_coordinated(c, g));
  if ((plan.command->has_join() || plan.command->has_heartbeat()) && on_session) {
    on_session();
  }
  RILL_CO_TRY(r, co_await c.submit(index, std::move(*plan.command)));
  RILL_CO_TRY(reply, coordinator_reply(g, api, r));
  out.header = std::move(reply);
  co_return out;
}

task<expected<group_poll>> plan_member_poll(coordinators& c, const coordinated_group& g, proto::PollRequest request,
                                            std::uint32_t catch_up_ticks) {
  const std::uint32_t index = c.index_for(g.key());
  auto planned = plan_coordinated_poll(coordinated_state(c.machine(index), g), request);
  if (planned) {
    co_return planned;
  }
  (void)co_await c.caught_up(index, catch_up_ticks);
  co_return plan_coordinated_poll(coordinated_state(c.machine(index), g), std::move(request));
}

task<expected<void>> confirm_member_poll(coordinators& c, const coordinated_group& g, const group_poll& planned,
                                         std::optional<std::int64_t> next_offset, poll_bug bug) {
  const std::uint32_t index = c.index_for(g.key());
  const group_machine& m = c.machine(index);
  if (bug == poll_bug::unconfirmed) {
    // As it was: this node's replica, as it is, then the auto-commit when it moves the offset.
    const group_state* local = coordinated_state(m, g);
    if (local == nullptr) {
      co_return rill::unexpected(make_error_code(net::status::group_not_found),
                                 "the group was deleted while the poll waited");
    }
    RILL_CO_TRY_VOID(check_delivery(*local, planned));
    if (const auto committed = local->committed(planned.partition);
        planned.auto_commit && next_offset && (!committed || *committed < static_cast<std::uint64_t>(*next_offset))) {
      auto commit = commit_command(g, planned.member, planned.generation, planned.partition,
                                   static_cast<std::uint64_t>(*next_offset));
      RILL_CO_TRY(r, co_await c.submit(index, std::move(commit)));
      RILL_CO_TRY_VOID(coordinator_status(r));
    }
    co_return expected<void>{};
  }
  // The partition may have changed hands while the poll waited, or before it through another node, in commits this
  // node's replica has not applied yet. Data goes out only once the member's ownership is confirmed against the
  // committed state: by its auto-commit, or else by a read barrier, after which this replica has applied everything
  // committed before it.
  bool committed_now = false;  // (only with the planted recheck_after_commit)
  if (const group_state* before = coordinated_state(m, g); before != nullptr && planned.auto_commit && next_offset) {
    const auto next = static_cast<std::uint64_t>(*next_offset);
    if (const auto committed = before->committed(planned.partition); !committed || *committed < next) {
      // The commit applies only if the member owns the partition in its generation at that op: the read is
      // linearized there, and the data goes out whatever changed after it. (A check of a later state here would
      // refuse data whose offset is already committed: the group would skip it.)
      auto commit = commit_command(g, planned.member, planned.generation, planned.partition, next);
      RILL_CO_TRY(r, co_await c.submit(index, std::move(commit)));
      RILL_CO_TRY_VOID(coordinator_status(r));
      if (bug != poll_bug::recheck_after_commit) {
        co_return expected<void>{};
      }
      committed_now = true;
    }
  }
  if (next_offset && !committed_now) {
    RILL_CO_TRY_VOID(co_await c.read_barrier(index));
  }
  const group_state* now = coordinated_state(m, g);
  if (now == nullptr) {
    co_return rill::unexpected(make_error_code(net::status::group_not_found),
                               "the group was deleted while the poll waited");
  }
  co_return check_delivery(*now, planned);
}

}  // namespace rill::actors
