// descriptor_budget: see the header.
#include "config/descriptor_budget.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fmt/core.h>

#include "config/errc.h"

namespace rill::config {

std::uint64_t descriptors_needed(const server_config& c) noexcept {
  return c.connections_max + c.limits.open_files_max + descriptors_reserved;
}

expected<void> check_descriptor_budget(const server_config& c, std::uint64_t descriptors_limit) {
  const std::uint64_t needed = descriptors_needed(c);
  if (needed > descriptors_limit) {
    return unexpected(
        make_error_code(errc::out_of_range),
        fmt::format("descriptors: network.connections_max = {} plus limits.open_files_max = {} plus {} reserved "
                    "need {} descriptors, but this process may open {} (RLIMIT_NOFILE, raised to its hard limit): "
                    "lower network.connections_max or limits.open_files_max, or raise the hard limit (ulimit -Hn, "
                    "systemd LimitNOFILE=)",
                    c.connections_max, c.limits.open_files_max, descriptors_reserved, needed, descriptors_limit));
  }
  return {};
}

namespace {
// The most a soft limit may be set to (fs.nr_open); RLIM_INFINITY as a hard limit is capped there.
std::uint64_t nr_open() {
  std::ifstream in("/proc/sys/fs/nr_open");
  std::uint64_t n = 0;
  if (in >> n && n > 0) {
    return n;
  }
  return 1u << 20;  // the kernel's default
}
}  // namespace

expected<descriptor_limit> raise_descriptor_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    return unexpected(make_error_code(errc::bad_value),
                      fmt::format("getrlimit(RLIMIT_NOFILE): {}", std::strerror(errno)));
  }
  descriptor_limit out;
  out.soft_before = rl.rlim_cur == RLIM_INFINITY ? nr_open() : rl.rlim_cur;
  out.hard = rl.rlim_max == RLIM_INFINITY ? nr_open() : rl.rlim_max;
  out.soft = out.soft_before;
  if (out.soft_before < out.hard) {
    rl.rlim_cur = out.hard;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {
      return unexpected(make_error_code(errc::bad_value),
                        fmt::format("setrlimit(RLIMIT_NOFILE, {}): {}", out.hard, std::strerror(errno)));
    }
    out.soft = out.hard;
  }
  return out;
}

expected<void> fit_descriptor_budget(const server_config& c) {
  RILL_TRY(fds, raise_descriptor_limit());
  if (c.level <= log_level::info) {
    fmt::print(stderr, "rilld: descriptors: soft limit {} (was {}, hard {}); the configured limits need {}\n", fds.soft,
               fds.soft_before, fds.hard, descriptors_needed(c));
  }
  return check_descriptor_budget(c, fds.soft);
}

}  // namespace rill::config
