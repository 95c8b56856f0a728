#!/usr/bin/env bash
# The rill CLI as a tool: flags anywhere, RILL_SERVER and contexts, --version, completion, suggestions, exit codes,
# errors as JSON, confirmation before deleting data, and streaming produce (line by line, nothing lost on Ctrl-C).
# Against the real rilld on loopback ports the kernel picks.
set -euo pipefail
rilld=$1
rill=$2
dir=$(mktemp -d)
pid=
producer=
cleanup() {
  [ -n "$producer" ] && kill -9 "$producer" 2>/dev/null
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/rilld.log" >&2 || true; exit 1; }
# The client configuration file of this test only.
export RILL_CLI_CONFIG=$dir/config/cli.toml
unset RILL_SERVER RILL_CONTEXT RILL_HTTP

"$rilld" --data-dir "$dir/data" --tcp 127.0.0.1:0 --http 127.0.0.1:0 --set runtime.cpu_allocation=2 \
  --set runtime.pin_cores=false >>"$dir/rilld.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  if [ -f "$dir/data/runtime/current_config.toml" ]; then
    addr=$(sed -n "s/^tcp_address = ['\"]\(.*\)['\"]$/\1/p" "$dir/data/runtime/current_config.toml")
    [ -n "$addr" ] && break
  fi
  sleep 0.05
done
[ -n "${addr:-}" ] || fail "rilld did not start"
# expect CODE CMD...: runs CMD, checks its exit code; its stderr is in $dir/err, its stdout in $dir/out.
expect() {
  local want=$1
  shift
  set +e
  "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  set -e
  [ $rc -eq "$want" ] || fail "$* exited $rc, expected $want; stderr: $(cat "$dir/err")"
}

# --- where to connect ---------------------------------------------------------------------------------------------
"$rill" --server "$addr" stream create shop >/dev/null || fail "stream create"
# Global flags after the subcommand, at any depth.
"$rill" stream list --json --server "$addr" | grep -q '"name":"shop"' || fail "flags after the subcommand"
"$rill" stream --server "$addr" list --json | grep -q '"name":"shop"' || fail "flags between subcommands"
# RILL_SERVER, and --server over it.
RILL_SERVER=$addr "$rill" ping | grep -q "answered" || fail "RILL_SERVER"
expect 3 env RILL_SERVER=127.0.0.1:1 "$rill" ping
RILL_SERVER=127.0.0.1:1 "$rill" --server "$addr" ping >/dev/null || fail "--server wins over RILL_SERVER"
# A server list: the first that accepts.
"$rill" --server "127.0.0.1:1,$addr" ping | grep -q "$addr answered" || fail "server list"
# Bad addresses are usage errors (2), naming what is expected.
expect 2 "$rill" --server 19420 ping
grep -q "HOST:PORT" "$dir/err" || fail "--server 19420 names HOST:PORT: $(cat "$dir/err")"
expect 2 env RILL_SERVER=nonsense "$rill" ping
grep -q "RILL_SERVER" "$dir/err" || fail "a bad RILL_SERVER is named: $(cat "$dir/err")"

# Contexts: a 0600 file, the current one used by default, --context and RILL_CONTEXT to pick another.
"$rill" context add local --server "$addr" | grep -q "saved context local" || fail "context add"
[ "$(stat -c %a "$RILL_CLI_CONFIG")" = 600 ] || fail "the client file is 0600: $(stat -c %a "$RILL_CLI_CONFIG")"
"$rill" ping | grep -q "$addr answered" || fail "the current context is used"
"$rill" context add dead --server 127.0.0.1:1 >/dev/null || fail "context add dead"
"$rill" context list | grep -Eq '^\* +local ' || fail "context list marks the current one: $("$rill" context list)"
expect 3 "$rill" --context dead ping
expect 3 env RILL_CONTEXT=dead "$rill" ping
expect 2 "$rill" --context nowhere ping
grep -q "no such context" "$dir/err" || fail "unknown context: $(cat "$dir/err")"
RILL_SERVER=$addr "$rill" --context dead ping >/dev/null || fail "RILL_SERVER wins over the context"
"$rill" context use dead >/dev/null && expect 3 "$rill" ping
"$rill" context use local >/dev/null
"$rill" context show | grep -q "from context local" || fail "context show: $("$rill" context show)"
chmod 644 "$RILL_CLI_CONFIG"
expect 2 "$rill" ping
grep -q "chmod 600" "$dir/err" || fail "a readable client file is refused with the fix: $(cat "$dir/err")"
chmod 600 "$RILL_CLI_CONFIG"
printf 'current = "local"\n[contexts.local]\nserver = "%s"\npasword = "x"\n' "$addr" >"$RILL_CLI_CONFIG"
expect 2 "$rill" ping
grep -q "contexts.local.pasword: unknown key" "$dir/err" || fail "unknown key named: $(cat "$dir/err")"
"$rill" --server "$addr" ping >/dev/null || fail "a flagged command does not need the file"
rm "$RILL_CLI_CONFIG"

# --- the command line itself --------------------------------------------------------------------------------------
"$rill" --version | grep -Eq '^rill [0-9]+\.[0-9]+\.[0-9]+$' || fail "--version"
"$rill" version | grep -Eq '^rill [0-9]' || fail "version"
"$rill" --json --version | grep -q '"version"' || fail "--json --version"
expect 2 "$rill"
grep -q "stream" "$dir/out" || fail "bare rill prints the commands: $(cat "$dir/out")"
expect 2 "$rill" stream lst
grep -q "did you mean list" "$dir/err" || fail "subcommand suggestion: $(cat "$dir/err")"
expect 2 "$rill" --server "$addr" consume shop orders --partiton 1
grep -q "did you mean --partition" "$dir/err" || fail "flag suggestion: $(cat "$dir/err")"
"$rill" stream --help | grep "create" >/dev/null || fail "stream --help"
# Completion: the generated bash function completes subcommands and flags of the command typed so far.
"$rill" completion bash >"$dir/completion.bash"
words=$(bash -c "source '$dir/completion.bash'; COMP_WORDS=(rill str); COMP_CWORD=1; _rill; echo \${COMPREPLY[*]}")
[ "$words" = "stream" ] || fail "completion of 'rill str': '$words'"
words=$(bash -c "source '$dir/completion.bash'; COMP_WORDS=(rill topic create --part); COMP_CWORD=3; _rill; echo \${COMPREPLY[*]}")
[ "$words" = "--partitions" ] || fail "completion of 'rill topic create --part': '$words'"
"$rill" completion zsh >"$dir/completion.zsh"
grep -q "bashcompinit" "$dir/completion.zsh" || fail "zsh completion"
expect 2 "$rill" completion fish

# --- errors, in words and in JSON ---------------------------------------------------------------------------------
r() { "$rill" --server "$addr" "$@"; }
expect 1 r stream describe nope
grep -q "^rill: " "$dir/err" || fail "an error in words: $(cat "$dir/err")"
expect 1 r --json stream describe nope
grep -q '^{"error":{"code":"stream_not_found","exit":1,"message":' "$dir/err" || fail "JSON error: $(cat "$dir/err")"
[ ! -s "$dir/out" ] || fail "nothing on stdout on error"
expect 2 r stream list --json --bogus
grep -q '"code":"usage"' "$dir/err" || fail "JSON usage error: $(cat "$dir/err")"
expect 3 "$rill" --json --server 127.0.0.1:1 ping
grep -q '"exit":3' "$dir/err" || fail "JSON unreachable: $(cat "$dir/err")"

# --- tables -------------------------------------------------------------------------------------------------------
r stats | grep -q "MESSAGES" || fail "stats table: $(r stats)"
r topic create shop orders --partitions 2 >/dev/null
r topic list shop | grep -Eq "^orders +[0-9]+ +2 +0 +0 B +forever +sync_before_ack$" ||
  fail "topic list table: $(r topic list shop)"

# --- streaming produce --------------------------------------------------------------------------------------------
# A line is delivered while the producer is still running (tail -f | rill produce): a consumer sees the first line
# long before standard input closes.
mkfifo "$dir/lines"
"$rill" --server "$addr" produce shop orders --partition 0 <"$dir/lines" 2>"$dir/produce.err" &
producer=$!
exec 7>"$dir/lines"
echo first >&7
seen=
for _ in $(seq 100); do
  seen=$(r consume shop orders --partition 0)
  [ -n "$seen" ] && break
  sleep 0.05
done
[ "$seen" = "first" ] || fail "the first line was not delivered while the pipe was open: '$seen'"
kill -0 "$producer" || fail "the producer should still be running"
# Ctrl-C loses nothing that was read, not even a last line without its newline.
printf 'second\nthird' >&7
sleep 0.3
kill -INT "$producer"
wait "$producer" || fail "produce after SIGINT exited $?: $(cat "$dir/produce.err")"
producer=
exec 7>&-
[ "$(r consume shop orders --partition 0)" = "$(printf 'first\nsecond\nthird')" ] ||
  fail "after Ctrl-C: $(r consume shop orders --partition 0)"
grep -q "3 messages acknowledged" "$dir/produce.err" || fail "produce summary: $(cat "$dir/produce.err")"
# KEY<SEP>VALUE lines.
printf 'k1:v1\nk2:v2\n' | r produce shop orders --partition 1 --key-separator : 2>/dev/null
r --json consume shop orders --partition 1 | grep -q '"key":"k1".*"value":"v1"' || fail "--key-separator"

# --- deleting data asks first ----------------------------------------------------------------------------------
expect 2 r topic delete shop orders </dev/null
grep -q "pass --yes" "$dir/err" || fail "delete without --yes: $(cat "$dir/err")"
r topic describe shop orders >/dev/null || fail "the topic must still exist"
expect 2 r stream delete shop </dev/null
if command -v script >/dev/null; then
  # On a terminal the command asks; anything but y keeps the data.
  set +e
  (sleep 1; printf 'n\n') | timeout 10 script -qec "$rill --server $addr topic delete shop orders" /dev/null >"$dir/tty"
  rc=$?
  set -e
  [ $rc -eq 1 ] || fail "declined delete exited $rc: $(cat "$dir/tty")"
  grep -q "Delete it and its data" "$dir/tty" || fail "the prompt: $(cat "$dir/tty")"
  r topic describe shop orders >/dev/null || fail "the topic must survive a declined delete"
fi
r topic delete shop orders --yes | grep -q "deleted topic orders" || fail "delete --yes"
r --json stream delete shop | grep -q '"deleted":"shop"' || fail "an empty stream needs no --yes"
echo "rill CLI usage test passed"
