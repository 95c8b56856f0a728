#include "storage/errc.h"

#include <cerrno>
#include <cstring>

namespace rill::storage {
namespace {
class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rill.storage"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::invalid_batch:
        return "invalid record batch";
      case errc::crc_mismatch:
        return "CRC mismatch";
      case errc::batch_too_large:
        return "record batch too large";
      case errc::unsupported_compression:
        return "unsupported compression codec";
      case errc::compression_error:
        return "compression error";
      case errc::io_error:
        return "I/O error";
      case errc::no_space:
        return "no space left on device";
      case errc::fenced:
        return "partition fenced: writes refused until recovery";
      case errc::overloaded:
        return "partition overloaded, retry later";
      case errc::offset_out_of_range:
        return "offset out of range";
      case errc::corrupt_data:
        return "corrupt data on disk";
      case errc::not_found:
        return "not found";
      case errc::invalid_argument:
        return "invalid argument";
      case errc::closed:
        return "log closed";
      case errc::unsupported_attributes:
        return "unsupported batch attributes (transactional or control)";
      case errc::invalid_producer_fields:
        return "inconsistent producer id, epoch and sequence";
      case errc::superseded:
        return "write superseded before it landed";
      case errc::unavailable:
        return "the replicated group is unavailable";
      case errc::removed:
        return "removed by retention";
    }
    return "unknown storage error";
  }
};
}  // namespace

const std::error_category& storage_category() noexcept {
  static const category instance;
  return instance;
}

rill::error io_error(int negative_errno, const std::string& what) {
  const int e = -negative_errno;
  const errc code = (e == ENOSPC || e == EDQUOT) ? errc::no_space : errc::io_error;
  return rill::error(make_error_code(code), what + ": " + std::strerror(e));
}
}  // namespace rill::storage
