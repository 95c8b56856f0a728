#pragma once
// counter_machine: the consensus tests' state machine. It sums the body sizes it applies; a reply and a checkpoint
// are that sum as 8 bytes (little-endian), and restore() refuses anything of another size.
#include <cstdint>
#include <span>
#include <vector>

#include "base/endian.h"
#include "consensus/state_machine.h"

namespace rill::consensus::testing {

class counter_machine final : public state_machine {
 public:
  std::vector<std::byte> apply(const header&, std::span<const std::byte> body) override {
    total += body.size();
    return snapshot();
  }
  std::vector<std::byte> snapshot() const override {
    std::vector<std::byte> out(8);
    store_le<std::uint64_t>(out.data(), total);
    return out;
  }
  bool restore(std::span<const std::byte> bytes) override {
    if (bytes.size() != 8) {
      return false;
    }
    total = load_le<std::uint64_t>(bytes.data());
    return true;
  }
  std::uint64_t total = 0;
};

}  // namespace rill::consensus::testing
