// rill CLI: the client configuration file and where to connect (see cli_context.h).
#include "tools/cli_context.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <toml++/toml.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

#include "config/address.h"

namespace rill::cli {
namespace {
rill::error bad(std::string detail) {
  return {std::make_error_code(std::errc::invalid_argument), std::move(detail)};
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}
}  // namespace

std::string client_file_path() {
  if (auto p = env("RILL_CLI_CONFIG"); !p.empty()) {
    return p;
  }
  if (auto x = env("XDG_CONFIG_HOME"); !x.empty()) {
    return x + "/rill/cli.toml";
  }
  return env("HOME") + "/.config/rill/cli.toml";
}

expected<void> check_server_list(const std::string& key, const std::string& value) {
  if (value.empty()) {
    return unexpected(bad(fmt::format("{}: empty; expected HOST:PORT or a list HOST:PORT,HOST:PORT", key)));
  }
  std::size_t at = 0;
  while (at <= value.size()) {
    const auto comma = std::min(value.find(',', at), value.size());
    const std::string one = value.substr(at, comma - at);
    if (auto a = config::parse_address(one); !a || a->port == 0) {
      return unexpected(bad(fmt::format("{} {}: '{}' is not HOST:PORT with a port 1-65535 (e.g. 127.0.0.1:9420){}", key,
                                        value, one, a ? "" : ": " + a.error().detail())));
    }
    at = comma + 1;
  }
  return {};
}

expected<client_file> load_client_file() {
  client_file f;
  f.path = client_file_path();
  struct stat st {};
  if (::stat(f.path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return f;
    }
    return unexpected(bad(fmt::format("{}: {}", f.path, std::strerror(errno))));
  }
  if ((st.st_mode & 077) != 0) {
    return unexpected(
        bad(fmt::format("{} may be read or written by others (mode {:04o}); it can hold credentials, "
                        "so rill refuses it: run chmod 600 {}",
                        f.path, st.st_mode & 07777, f.path)));
  }
  f.exists = true;
  std::ifstream in(f.path);
  if (!in) {
    return unexpected(bad(fmt::format("{}: cannot be read", f.path)));
  }
  std::stringstream text;
  text << in.rdbuf();
  toml::table root;
  try {
    root = toml::parse(text.str(), f.path);
  } catch (const toml::parse_error& e) {
    return unexpected(bad(fmt::format("{} line {}: {}", f.path, e.source().begin.line, e.description())));
  }
  for (const auto& [key, node] : root) {
    const std::string k(key.str());
    const auto line = node.source().begin.line;
    if (k == "current") {
      const auto* s = node.as_string();
      if (s == nullptr) {
        return unexpected(bad(fmt::format("{} line {}: current: expected a context name (a string)", f.path, line)));
      }
      f.current = s->get();
    } else if (k == "contexts") {
      const auto* t = node.as_table();
      if (t == nullptr) {
        return unexpected(bad(fmt::format("{} line {}: contexts: expected tables [contexts.NAME]", f.path, line)));
      }
      for (const auto& [name_key, ctx_node] : *t) {
        const std::string name(name_key.str());
        const auto* ct = ctx_node.as_table();
        if (ct == nullptr) {
          return unexpected(bad(
              fmt::format("{} line {}: contexts.{}: expected a table", f.path, ctx_node.source().begin.line, name)));
        }
        context c;
        for (const auto& [field_key, field] : *ct) {
          const std::string field_name(field_key.str());
          const std::string where =
              fmt::format("{} line {}: contexts.{}.{}", f.path, field.source().begin.line, name, field_name);
          const auto* s = field.as_string();
          if (field_name != "server" && field_name != "http") {
            return unexpected(bad(fmt::format("{}: unknown key (allowed: server, http)", where)));
          }
          if (s == nullptr) {
            return unexpected(bad(fmt::format("{}: expected a string", where)));
          }
          RILL_TRY_VOID(check_server_list(where, s->get()));
          if (field_name == "http" && s->get().find(',') != std::string::npos) {
            return unexpected(bad(fmt::format("{}: one HOST:PORT (rill top reads one rilld)", where)));
          }
          (field_name == "server" ? c.server : c.http) = s->get();
        }
        if (c.server.empty()) {
          return unexpected(bad(fmt::format("{}: contexts.{} has no server", f.path, name)));
        }
        f.contexts.emplace(name, std::move(c));
      }
    } else {
      return unexpected(
          bad(fmt::format("{} line {}: {}: unknown key (allowed: current, [contexts.NAME])", f.path, line, k)));
    }
  }
  if (!f.current.empty() && !f.contexts.contains(f.current)) {
    return unexpected(bad(fmt::format("{}: current = \"{}\" names no context", f.path, f.current)));
  }
  return f;
}

expected<void> save_client_file(const client_file& f) {
  toml::table root;
  if (!f.current.empty()) {
    root.insert("current", f.current);
  }
  toml::table contexts;
  for (const auto& [name, c] : f.contexts) {
    toml::table t;
    t.insert("server", c.server);
    if (!c.http.empty()) {
      t.insert("http", c.http);
    }
    contexts.insert(name, std::move(t));
  }
  root.insert("contexts", std::move(contexts));
  std::ostringstream text;
  text << "# rill's client configuration (docs/cli.md). Keep it mode 0600: it may hold credentials.\n" << root << "\n";

  const std::filesystem::path path(f.path);
  std::error_code ec;
  if (path.has_parent_path()) {
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      return unexpected(bad(fmt::format("{}: {}", path.parent_path().string(), ec.message())));
    }
    ::chmod(path.parent_path().c_str(), 0700);
  }
  const std::string tmp = f.path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return unexpected(bad(fmt::format("{}: {}", tmp, std::strerror(errno))));
  }
  const std::string data = text.str();
  bool ok = ::fchmod(fd, 0600) == 0;
  for (std::size_t done = 0; ok && done < data.size();) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    ok = n > 0;
    done += ok ? static_cast<std::size_t>(n) : 0;
  }
  ok = ok && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), f.path.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : saved);
    ::unlink(tmp.c_str());
    return unexpected(bad(fmt::format("{}: {}", f.path, why)));
  }
  return {};
}

expected<endpoints> resolve_endpoints(const std::string& server_flag, const std::string& http_flag,
                                      const std::string& context_flag, bool http_wanted) {
  endpoints e;
  std::string ctx_name = context_flag.empty() ? env("RILL_CONTEXT") : context_flag;
  const bool ctx_named = !ctx_name.empty();
  std::optional<context> ctx;
  // The file is read only when something may come from it, so that a broken file does not stop a fully flagged
  // command.
  if (server_flag.empty() || (http_wanted && http_flag.empty()) || ctx_named) {
    RILL_TRY(f, load_client_file());
    if (!ctx_named) {
      ctx_name = f.current;
    }
    if (!ctx_name.empty()) {
      const auto it = f.contexts.find(ctx_name);
      if (it == f.contexts.end()) {
        std::string known;
        for (const auto& [n, c] : f.contexts) {
          known += (known.empty() ? "" : ", ") + n;
        }
        return unexpected(bad(fmt::format(
            "{} {}: no such context in {} (contexts: {})", context_flag.empty() ? "RILL_CONTEXT" : "--context",
            ctx_name, f.path, known.empty() ? "none; add one with rill context add NAME --server ..." : known)));
      }
      ctx = it->second;
    }
  }
  const std::string server_env = env("RILL_SERVER");
  const std::string http_env = env("RILL_HTTP");
  if (!server_flag.empty()) {
    e.server = server_flag;
    e.source = "--server";
  } else if (!server_env.empty()) {
    e.server = server_env;
    e.source = "RILL_SERVER";
  } else if (ctx) {
    e.server = ctx->server;
    e.source = "context " + ctx_name;
  } else {
    e.server = "127.0.0.1:9420";
    e.source = "default";
  }
  RILL_TRY_VOID(check_server_list(e.source == "default" ? "--server" : e.source, e.server));
  if (!http_flag.empty()) {
    e.http = http_flag;
  } else if (!http_env.empty()) {
    e.http = http_env;
  } else if (ctx && !ctx->http.empty()) {
    e.http = ctx->http;
  } else {
    e.http = "127.0.0.1:9421";
  }
  RILL_TRY_VOID(check_server_list(!http_flag.empty() ? "--http" : !http_env.empty() ? "RILL_HTTP" : "http", e.http));
  return e;
}

}  // namespace rill::cli
