# Shared by the CLI cluster tests (sourced): three rilld nodes on loopback, each on fixed free ports, formatted and
# started by the test; `r` runs the rill CLI against all three. Expects $1 = rilld and $2 = rill; cleans up on exit
# (KEEP_TEST_DIR=1 keeps the directory: logs, data, outputs).
rilld=$1
rill=$2
dir=$(mktemp -d)
declare -A pid
cpid=
cleanup() {
  [ -n "$cpid" ] && kill -9 "$cpid" 2>/dev/null
  for p in "${pid[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  if [ -n "${KEEP_TEST_DIR:-}" ]; then echo "kept $dir" >&2; else rm -rf "$dir"; fi
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for i in 1 2 3; do echo "== node $i" >&2; tail -20 "$dir/n$i.log" >&2 || true; done
  exit 1
}

# Nine free loopback ports: client, HTTP and replica plane of each node (fixed, so a restart keeps its address).
# Below the kernel's ephemeral range: a port from bind(0) could be taken as a source port by any client connection
# of a test running beside this one before the node binds it (tests/cluster/cluster_harness.h, free_port).
read -r -a ports <<<"$(python3 -c '
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
s = []
while len(s) < 9:
    x = socket.socket()
    try:
        x.bind(("127.0.0.1", random.randint(10000, max(low - 1, 11000))))
        s.append(x)
    except OSError:
        x.close()
print(" ".join(str(x.getsockname()[1]) for x in s))')"
tcp() { echo "${ports[$((3 * ($1 - 1)))]}"; }
http() { echo "${ports[$((3 * ($1 - 1) + 1))]}"; }
rep() { echo "${ports[$((3 * ($1 - 1) + 2))]}"; }
members="1@127.0.0.1:$(rep 1),2@127.0.0.1:$(rep 2),3@127.0.0.1:$(rep 3)"
cluster_args() { echo "--set cluster.id=5 --set cluster.node_id=$1 --set cluster.members=$members --replica 127.0.0.1:$(rep "$1")"; }

start() {
  # shellcheck disable=SC2046
  "$rilld" --data-dir "$dir/n$1" $(cluster_args "$1") --tcp "127.0.0.1:$(tcp "$1")" --http "127.0.0.1:$(http "$1")" \
    --set runtime.cpu_allocation=2 --set runtime.pin_cores=false >>"$dir/n$1.log" 2>&1 &
  pid[$1]=$!
  disown "$!"  # (killed on purpose: no job notice)
  for _ in $(seq 300); do
    "$rill" --server "127.0.0.1:$(tcp "$1")" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  fail "node $1 did not start"
}
servers="127.0.0.1:$(tcp 1),127.0.0.1:$(tcp 2),127.0.0.1:$(tcp 3)"
r() { "$rill" --server "$servers" "$@"; }
# Formats the three nodes and starts them.
start_cluster() {
  for i in 1 2 3; do
    # shellcheck disable=SC2046
    "$rilld" format --data-dir "$dir/n$i" $(cluster_args "$i") >/dev/null || fail "format node $i"
    start "$i"
  done
}
