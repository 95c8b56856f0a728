#pragma once
// The rill CLI's command tree seen from outside: shell completion scripts and "did you mean" suggestions, both
// generated from the CLI11 definition, so that neither can fall out of step with the commands.
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace rill::cli {

// A bash completion script for `program` (subcommands at every level; the flags of the command typed so far and
// the global ones after a "-"). zsh: the same through bashcompinit. `shell` is "bash" or "zsh".
std::string completion_script(const CLI::App& root, const std::string& program, const std::string& shell);

// For a command line CLI11 refused with extra arguments: one line per argument it did not expect, with the closest
// flag or subcommand of the command typed so far when one is near ("--partiton: did you mean --partition?").
std::string suggestions(const CLI::App& root, const std::vector<std::string>& unexpected);

}  // namespace rill::cli
