#include "actors/metadata_machine.h"

#include <string>

#include "base/endian.h"
#include "net/status.h"

namespace rill::actors {

std::vector<std::byte> metadata_machine::encode_reply(const expected<metadata_state::applied>& r) {
  std::vector<std::byte> out(10);
  std::uint16_t status = 0;
  std::string message;
  if (!r) {
    const auto& code = r.error().code();
    status = code.category() == make_error_code(net::status::ok).category()
                 ? static_cast<std::uint16_t>(code.value())
                 : static_cast<std::uint16_t>(net::status::internal_error);
    message = r.error().detail();
  }
  store_le<std::uint16_t>(out.data(), status);
  store_le<std::uint32_t>(out.data() + 2, r ? r->stream_id : 0);
  store_le<std::uint32_t>(out.data() + 6, r ? r->topic_id : 0);
  const auto* p = reinterpret_cast<const std::byte*>(message.data());
  out.insert(out.end(), p, p + message.size());
  return out;
}

expected<metadata_state::applied> metadata_machine::decode_reply(std::span<const std::byte> bytes) {
  if (bytes.size() < 10) {
    return rill::unexpected(make_error_code(net::status::internal_error), "metadata reply of fewer than 10 bytes");
  }
  const auto status = load_le<std::uint16_t>(bytes.data());
  if (status != 0) {
    return rill::unexpected(make_error_code(static_cast<net::status>(status)),
                            std::string(reinterpret_cast<const char*>(bytes.data() + 10), bytes.size() - 10));
  }
  return metadata_state::applied{load_le<std::uint32_t>(bytes.data() + 2), load_le<std::uint32_t>(bytes.data() + 6)};
}

std::vector<std::byte> metadata_machine::apply(const consensus::header& prepare, std::span<const std::byte> body) {
  proto::MetadataCommand cmd;
  if (!cmd.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return encode_reply(
        rill::unexpected(make_error_code(net::status::internal_error), "a metadata command that does not parse"));
  }
  if (auto ok = state_.check(cmd); !ok) {
    return encode_reply(rill::unexpected(ok.error()));
  }
  return encode_reply(state_.apply(cmd, prepare.op));
}

std::vector<std::byte> metadata_machine::snapshot() const {
  const std::string s = state_.snapshot(0).SerializeAsString();
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

bool metadata_machine::restore(std::span<const std::byte> bytes) {
  proto::MetadataSnapshot snap;
  if (!snap.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return false;
  }
  auto restored = metadata_state::from_snapshot(snap);
  if (!restored) {
    return false;
  }
  state_ = std::move(*restored);
  return true;
}

}  // namespace rill::actors
