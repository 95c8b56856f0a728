#pragma once
// metadata_machine: metadata_state as the state machine of rill's metadata VSR group (a one-replica
// consensus::local_group in rilld). An operation is one proto::MetadataCommand; its reply says whether it applied
// and which ids it created or touched. Checkpoints are the proto::MetadataSnapshot of the state.
//
// Invariants: apply() never fails. A command that does not parse or does not check (the actor checks before it
// submits, so this is only a replay of something the state no longer accepts) is answered with the error, changing
// nothing, the same way on every replay. snapshot() of equal states gives equal bytes (the snapshot has no maps).
#include <cstdint>
#include <span>
#include <vector>

#include "actors/metadata_state.h"
#include "base/expected.h"
#include "consensus/state_machine.h"

namespace rill::actors {

inline constexpr std::uint8_t operation_metadata_command = consensus::operation_user_min;

class metadata_machine final : public consensus::state_machine {
 public:
  std::vector<std::byte> apply(const consensus::header& prepare, std::span<const std::byte> body) override;
  [[nodiscard]] std::vector<std::byte> snapshot() const override;
  [[nodiscard]] bool restore(std::span<const std::byte> bytes) override;

  [[nodiscard]] const metadata_state& state() const noexcept { return state_; }

  // Reply bytes: u16 status (net::status; 0 applied), u32 stream id, u32 topic id, then the error message.
  static std::vector<std::byte> encode_reply(const expected<metadata_state::applied>& r);
  static expected<metadata_state::applied> decode_reply(std::span<const std::byte> bytes);

 private:
  metadata_state state_;
};

}  // namespace rill::actors
