# Sourced by the dashboard tests after start_rilld: a known load for the page to show. Stream "shop", topic "orders"
# of 3 partitions: 3,000 messages on partition 0, of which the group "billing" consumed (and committed) 1,000, so its
# lag is 2,000; and rill-bench's 3,000 messages over the three partitions of its own stream (rill-bench-0).
dashboard_load() {
  r() { "$rill" --server "$addr" "$@"; }
  r stream create shop >/dev/null || fail "stream create"
  r topic create shop orders --partitions 3 >/dev/null || fail "topic create"
  seq 3000 | r produce shop orders --partition 0 >/dev/null || fail "produce to shop/orders"
  [ "$(r consume shop orders --group billing --count 1000 | wc -l)" = 1000 ] || fail "the group's 1,000"
  "$bench" produce --server "$addr" --producers 3 --partitions 3 --messages 3000 --batch 50 --keep --json \
    >/dev/null || fail "rill-bench produce"
}
