# Sourced by the shell tests: start_rilld DIR [rilld args...] starts $rilld on DIR/data with loopback ports the kernel
# picks, appends its output to DIR/rilld.log, and sets pid, addr (client) and haddr (monitoring) once it serves.
start_rilld() {
  local dir=$1
  shift
  "$rilld" --data-dir "$dir/data" --tcp 127.0.0.1:0 --http 127.0.0.1:0 --set runtime.cpu_allocation=2 \
    --set runtime.pin_cores=false "$@" >>"$dir/rilld.log" 2>&1 &
  pid=$!
  local config="$dir/data/runtime/current_config.toml"
  for _ in $(seq 300); do
    if [ -f "$config" ]; then
      addr=$(sed -n "s/^tcp_address = ['\"]\(.*\)['\"]$/\1/p" "$config")
      haddr=$(sed -n "s/^http_address = ['\"]\(.*\)['\"]$/\1/p" "$config")
      [ -n "$addr" ] && [ -n "$haddr" ] && return 0
    fi
    sleep 0.05
  done
  return 1
}
