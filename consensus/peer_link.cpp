// peer_link: one side of one replica-plane connection, as plain state (see the header).
#include "consensus/peer_link.h"

#include <algorithm>

#include <fmt/core.h>

#include "base/assert.h"
#include "storage/errc.h"

namespace rill::consensus {

peer_link::peer_link(peer_hello ours, std::uint64_t peer, std::vector<std::uint64_t> members, peer_link_options options)
    : ours_(ours), peer_(peer), members_(std::move(members)), options_(options), backoff_ms_(options.reconnect_min_ms) {
  RILL_ASSERT(peer_ != ours_.node_id, "a link from node {} to itself", peer_);
  RILL_ASSERT(std::find(members_.begin(), members_.end(), peer_) != members_.end(), "node {} is no member", peer_);
  RILL_ASSERT(options_.reconnect_min_ms >= 1);
  RILL_ASSERT(options_.reconnect_min_ms <= options_.reconnect_max_ms);
}

void peer_link::push(std::vector<std::byte> frame) {
  queued_bytes_ += frame.size();
  RILL_ASSERT(queued_bytes_ <= options_.queue_bytes_max);
  queue_.push_back(std::move(frame));
}

peer_link::queued peer_link::send(group_t group, const message& m) {
  auto frame = encode_frame(group, m);
  if (queued_bytes_ + frame.size() > options_.queue_bytes_max) {
    ++stats_.refused;
    return queued::full;
  }
  push(std::move(frame));
  return queued::yes;
}

peer_link::queued peer_link::send(const node_heartbeat& beat) {
  auto frame = encode_frame(beat);
  if (queued_bytes_ + frame.size() > options_.queue_bytes_max) {
    ++stats_.heartbeats_dropped;
    return queued::heartbeat_dropped;
  }
  push(std::move(frame));
  return queued::yes;
}

bool peer_link::connect_due(std::uint64_t now_ms) const noexcept {
  return dials() && state_ == state::idle && now_ms >= retry_at_ms_;
}

void peer_link::connecting() {
  RILL_ASSERT(dials(), "node {} is dialled by node {}, not the other way", ours_.node_id, peer_);
  RILL_ASSERT(state_ == state::idle);
  state_ = state::connecting;
}

void peer_link::connected() {
  RILL_ASSERT(state_ == state::connecting || (!dials() && state_ == state::idle));
  RILL_ASSERT(written_ == 0, "a connection starts with whole frames");
  RILL_ASSERT(!hello_queued_);
  queue_.push_front(encode(ours_));  // the hello before anything queued
  hello_queued_ = true;
  hello_in_.clear();
  theirs_.reset();
  reader_.reset();
  state_ = state::handshaking;
}

void peer_link::accepted(const peer_hello& theirs) {
  RILL_ASSERT(!dials(), "node {} dials node {}: it accepts no connection from it", ours_.node_id, peer_);
  RILL_ASSERT(theirs.node_id == peer_);
  connected();
  theirs_ = theirs;
  reader_.emplace(options_.payload_bytes_max);
  state_ = state::established;
  ++stats_.connects;
  backoff_ms_ = options_.reconnect_min_ms;
}

std::span<const std::byte> peer_link::to_write() const noexcept {
  if (queue_.empty() || state_ == state::idle || state_ == state::connecting) {
    return {};
  }
  if (state_ == state::handshaking && !hello_queued_) {
    return {};  // our hello is out; frames wait until theirs has checked out
  }
  return std::span<const std::byte>(queue_.front()).subspan(written_);
}

void peer_link::wrote(std::size_t bytes) {
  RILL_ASSERT(!queue_.empty());
  RILL_ASSERT(written_ + bytes <= queue_.front().size(), "wrote {} bytes of a frame with {} left", bytes,
              queue_.front().size() - written_);
  written_ += bytes;
  stats_.bytes_sent += bytes;
  if (written_ < queue_.front().size()) {
    return;
  }
  if (hello_queued_) {
    hello_queued_ = false;  // (the hello is not counted in queued_bytes_)
  } else {
    RILL_ASSERT(queued_bytes_ >= queue_.front().size());
    queued_bytes_ -= queue_.front().size();
    ++stats_.frames_sent;
  }
  queue_.pop_front();
  written_ = 0;
}

expected<std::vector<peer_frame>> peer_link::received(std::span<const std::byte> bytes) {
  stats_.bytes_received += bytes.size();
  if (state_ == state::handshaking) {
    // The dialling side: the peer's hello comes first.
    const std::size_t take = std::min(bytes.size(), peer_hello_bytes - hello_in_.size());
    hello_in_.insert(hello_in_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(take));
    bytes = bytes.subspan(take);
    if (hello_in_.size() < peer_hello_bytes) {
      return std::vector<peer_frame>{};
    }
    RILL_TRY(theirs, decode_peer_hello(hello_in_));
    RILL_TRY_VOID(check_peer_hello(theirs, ours_, peer_, members_));
    theirs_ = theirs;
    reader_.emplace(options_.payload_bytes_max);
    state_ = state::established;
    ++stats_.connects;
    backoff_ms_ = options_.reconnect_min_ms;
  }
  if (state_ != state::established) {
    return storage::make_unexpected(storage::errc::invalid_argument,
                                    fmt::format("bytes from node {} with no connection up", peer_));
  }
  RILL_TRY(frames, reader_->feed(bytes));
  stats_.frames_received += frames.size();
  return frames;
}

void peer_link::closed(std::uint64_t now_ms, std::string why) {
  if (hello_queued_) {
    RILL_ASSERT(!queue_.empty());
    queue_.pop_front();  // our hello of that connection (the next one gets its own)
    hello_queued_ = false;
  }
  written_ = 0;  // a frame partly written goes again whole
  reader_.reset();
  theirs_.reset();
  hello_in_.clear();
  last_error_ = std::move(why);
  state_ = state::idle;
  retry_at_ms_ = now_ms + backoff_ms_;
  backoff_ms_ = std::min(backoff_ms_ * 2, options_.reconnect_max_ms);
}

}  // namespace rill::consensus
