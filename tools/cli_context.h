#pragma once
// Where the rill CLI connects: flags, environment and the client configuration file with named contexts.
//
// The file is $RILL_CLI_CONFIG, else $XDG_CONFIG_HOME/rill/cli.toml, else ~/.config/rill/cli.toml (docs/cli.md):
//
//   current = "prod"                    # the context used when none is named
//   [contexts.prod]
//   server = "10.0.0.1:9420,10.0.0.2:9420"
//   http = "10.0.0.1:9421"
//
// Contract:
// - The file is meant to hold credentials and TLS settings (a later issue adds the keys): it is refused, with the
//   chmod to run, when its group or others may read or write it, and it is written only with mode 0600 (its folder
//   0700), atomically (a temporary file renamed over it).
// - An unknown key, a value of the wrong type or an address that is not HOST:PORT is an error naming the file, the
//   key and what is allowed; nothing is guessed.
// - Precedence, first set wins: --server / --http; RILL_SERVER / RILL_HTTP; the context named by --context or
//   RILL_CONTEXT (an error if it does not exist); the file's current context; 127.0.0.1:9420 / 127.0.0.1:9421.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/expected.h"

namespace rill::cli {

struct context {
  std::string server;  // "HOST:PORT[,HOST:PORT...]"
  std::string http;    // rilld's monitoring listener; empty: the default
};

struct client_file {
  std::string path;
  bool exists = false;
  std::string current;  // empty: none
  std::map<std::string, context> contexts;
};

// The file's path (not checked to exist).
std::string client_file_path();
// Reads the file at client_file_path(); a missing file is an empty one (exists false).
expected<client_file> load_client_file();
// Writes `f` to f.path (mode 0600, atomically).
expected<void> save_client_file(const client_file& f);

// Checks "HOST:PORT[,HOST:PORT...]"; the error names `key`.
expected<void> check_server_list(const std::string& key, const std::string& value);

struct endpoints {
  std::string server;
  std::string http;
  std::string source;  // where server came from: "--server", "RILL_SERVER", "context NAME", "default"
};
// Resolves where to connect by the precedence above (flag values empty when not given). The file is read only when
// something may come from it: a command whose addresses are all flags works whatever the file holds (http only
// counts when `http_wanted`).
expected<endpoints> resolve_endpoints(const std::string& server_flag, const std::string& http_flag,
                                      const std::string& context_flag, bool http_wanted);

}  // namespace rill::cli
