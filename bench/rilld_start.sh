# bench/rilld_start.sh (sourced by the bench scripts): start a scratch rilld and learn its addresses.
#
#   start_rilld RILLD DATA_DIR LOG
# starts RILLD on loopback with ports it picks (unpinned shards; RILLD_ARGS: more arguments, split on spaces, e.g.
# "--set storage.blocking_writes=false"), in the background, and waits for its
# runtime/current_config.toml. Sets rilld_pid, rilld_tcp (the client listener, HOST:PORT) and rilld_http; returns 1
# (after naming LOG) if it did not start within 10 s.
start_rilld() {
  local rilld=$1 dir=$2 log=$3
  # shellcheck disable=SC2086 # RILLD_ARGS: extra rilld arguments, split on spaces (e.g. "--set storage.x=y")
  "$rilld" --data-dir "$dir" --tcp 127.0.0.1:0 --http 127.0.0.1:0 --set runtime.pin_cores=false ${RILLD_ARGS:-} >"$log" 2>&1 &
  rilld_pid=$!
  for _ in $(seq 200); do
    [ -f "$dir/runtime/current_config.toml" ] && break
    sleep 0.05
  done
  rilld_tcp=$(sed -n "s/^tcp_address = ['\"]\(.*\)['\"]$/\1/p" "$dir/runtime/current_config.toml" 2>/dev/null)
  rilld_http=$(sed -n "s/^http_address = ['\"]\(.*\)['\"]$/\1/p" "$dir/runtime/current_config.toml" 2>/dev/null)
  [ -n "$rilld_tcp" ] || { echo "rilld ($rilld) did not start; see $log" >&2; return 1; }
}
