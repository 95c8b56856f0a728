#pragma once
// sample_names: monitoring by name. The metrics registry knows partitions and groups by numeric ids (what their
// actors were spawned with); the names an operator knows them by live in the metadata, and a stream or topic may be
// renamed (stream_update, topic_update), so names are looked up when a page is rendered, not kept in the actor.
//
// Runs on the HTTP thread over the routing table's metadata view (immutable, shared): no lock, no message, one map
// lookup per partition or group sample. Plain C++ (no CAF).
#include <vector>

#include "actors/metadata_state.h"
#include "actors/runtime/metrics.h"

namespace rill::actors {

// Sets stream_name and topic_name of every partition and group sample in `actors` from `view`, and display_name
// of partition and group actors ("stream/topic/partition", "stream/topic/group"). Ids the view does not have (the
// partition or group is being deleted) leave the names empty and display_name as the actor's name.
void name_samples(std::vector<actor_sample>& actors, const metadata_view& view);

// What /api/topics reports about the node beside its topics: counted from `view` (streams and topics that exist,
// including those whose partitions have not started yet) plus the open connections.
node_totals node_totals_of(const metadata_view& view, std::uint32_t connections);

}  // namespace rill::actors
