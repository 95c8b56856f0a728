#pragma once
// homed: the mix-in that gives an actor its home shard. The scheduler policy routes every job of a homed actor to
// that shard's queue, from any thread; actors without it get the shard of their actor id (stable, spread out).
#include <cstddef>

namespace rill::actors {

class homed {
 public:
  explicit homed(std::size_t home_shard) noexcept : home_shard_(home_shard) {}
  virtual ~homed() = default;
  [[nodiscard]] std::size_t home_shard() const noexcept { return home_shard_; }

 private:
  std::size_t home_shard_;
};

}  // namespace rill::actors
