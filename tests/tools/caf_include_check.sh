#!/usr/bin/env bash
# caf_include_check: fails when CAF leaks out of the actor shells. The rule (docs/design "Layout"):
#   - storage/, consensus/, net/, config/, base/ and simulation/ include no CAF header (<caf/...> or "caf/...");
#   - in actors/, CAF is allowed only in the actors' headers, actors/**/*.hpp, in the .cpp files that implement
#     them (x.cpp beside x.hpp), and in the two files that wire CAF up behind plain headers: actors/broker.cpp
#     (broker.h) and actors/runtime/runtime.cpp (runtime.h). Every other actors/ file (*.h, and *.cpp without a
#     .hpp of its own: the state classes and handlers) is plain: it includes neither a CAF header nor an
#     actors/**/*.hpp (those carry CAF).
# Prints each offending file:line and the include; exits 1 if there is one.
#
#   caf_include_check.sh SOURCE_ROOT     check the tree
#   caf_include_check.sh --self-test     check that planted includes are found (and a clean tree passes)
set -euo pipefail

check() {
  local root=$1 bad=0 f rel
  local caf='^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]caf/'
  local shell_hpp='^[[:space:]]*#[[:space:]]*include[[:space:]]*"actors/.*\.hpp"'
  report() {  # file, pattern
    local hits
    if hits=$(grep -nE "$2" "$root/$1"); then
      while IFS= read -r line; do
        echo "$1:${line%%:*}: CAF outside the actor shells: ${line#*:}"
      done <<<"$hits"
      bad=1
    fi
  }
  for dir in storage consensus net config base simulation; do
    [ -d "$root/$dir" ] || continue
    while IFS= read -r -d '' f; do
      report "${f#"$root"/}" "$caf"
    done < <(find "$root/$dir" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cc' \) -print0)
  done
  if [ -d "$root/actors" ]; then
    while IFS= read -r -d '' f; do
      rel=${f#"$root"/}
      case "$rel" in
        *.hpp | actors/broker.cpp | actors/runtime/runtime.cpp) continue ;;
        *.cpp) [ -f "${f%.cpp}.hpp" ] && continue ;;
      esac
      report "$rel" "$caf"
      report "$rel" "$shell_hpp"
    done < <(find "$root/actors" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cc' \) -print0)
  fi
  return $bad
}

self_test() {
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp/storage" "$tmp/actors/runtime" "$tmp/net"
  printf '#include <vector>\n' >"$tmp/storage/clean.h"
  printf '#include <caf/all.hpp>\n' >"$tmp/actors/thing_actor.hpp"
  printf '#include "actors/thing_actor.hpp"\n#include <caf/send.hpp>\n' >"$tmp/actors/thing_actor.cpp"
  check "$tmp" >/dev/null || { echo "self-test: a clean tree was refused"; return 1; }
  printf '// x\n#include <caf/all.hpp>\n' >"$tmp/storage/leak.cpp"
  printf '#include "actors/thing_actor.hpp"\n' >"$tmp/actors/thing_state.h"
  printf '#  include "caf/actor.hpp"\n' >"$tmp/actors/runtime/handler.cpp"
  local out
  if out=$(check "$tmp"); then
    echo "self-test: planted CAF includes were not found"
    return 1
  fi
  for want in "storage/leak.cpp:2:" "actors/thing_state.h:1:" "actors/runtime/handler.cpp:1:"; do
    grep -qF "$want" <<<"$out" || { echo "self-test: $want not reported"; echo "$out"; return 1; }
  done
  [ "$(wc -l <<<"$out")" -eq 3 ] || { echo "self-test: unexpected reports"; echo "$out"; return 1; }
  echo "self-test passed"
}

case "${1:-}" in
  --self-test) self_test ;;
  "") echo "usage: $0 SOURCE_ROOT | --self-test" >&2; exit 2 ;;
  *)
    if check "$1"; then
      echo "no CAF header outside the actor shells"
    else
      exit 1
    fi
    ;;
esac
