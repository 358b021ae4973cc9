#!/usr/bin/env bash
# The one-command demo. On a fresh Debian machine with Rust: builds stb, starts the local
# stack (ClickHouse engine + Kafka broker, no Docker), creates the orders topic, produces
# commerce events, builds examples/orders with `stb build --auto-approve`, produces more
# events while the pipelines run, rebuilds from retained history, runs `stb test` and
# `stb audit`, stages, promotes and rolls back virtual deployments of examples/deployments,
# and checks that every event reached every model exactly once. Prints a summary; exits 1
# if a check fails.
#   scripts/demo.sh          leaves the stack running (stop it with `stb local down`)
#   scripts/demo.sh --stop   stops the stack at the end
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streambuild/target}"
stop_at_end=false
[ "${1:-}" = "--stop" ] && stop_at_end=true
say() { printf '\n==> %s\n' "$*"; }

say "building the web UI that stb dev serves"
"$repo/scripts/build-ui.sh"

say "building stb and the event producer"
cargo build --locked -p stb -p stb-example-orders --manifest-path "$repo/Cargo.toml"
stb="$CARGO_TARGET_DIR/debug/stb"
producer="$CARGO_TARGET_DIR/debug/orders-producer"
project="$repo/examples/orders"

say "starting the local stack"
"$stb" local up
$stop_at_end && trap '"$stb" local down >/dev/null 2>&1 || true' EXIT
eval "$("$stb" local env)"
export STREAMBUILD_CLICKHOUSE_HOST="$STB_LOCAL_CLICKHOUSE_HOST"
export STREAMBUILD_CLICKHOUSE_PORT="$STB_LOCAL_CLICKHOUSE_PORT"
query() { curl -sS --fail-with-body "$STB_LOCAL_CLICKHOUSE_URL/" --data-binary "$1"; }
vars="{\"kafka_brokers\": \"$STB_LOCAL_KAFKA_BROKERS\"}"
database=orders_demo
# A clean run every time: a new topic and an empty target database.
query "DROP DATABASE IF EXISTS $database SYNC" >/dev/null

say "creating topic orders.events (3 partitions) and producing 300 events"
"$producer" --reset-topic --from 0 --count 300

say "stb build --auto-approve"
"$stb" build --auto-approve --project-dir "$project" --vars "$vars"

say "producing 150 more events while the pipelines run"
"$producer" --from 300 --count 150
expected=450
wait_for_rows() { # table, rows; $database names the database
  local table=$1 want=$2 got=0
  for _ in $(seq 1 240); do
    got="$(query "SELECT count() FROM $database.$table")"
    [ "$got" -ge "$want" ] && break
    sleep 0.5
  done
  echo "$got"
}
landed="$(wait_for_rows tbl__order_events $expected)"
echo "order events in the warehouse: $landed"

say "top customers (view__top_customers)"
query "SELECT customer_id, revenue_cents, paid_orders FROM $database.view__top_customers LIMIT 5 FORMAT PrettyCompactMonoBlock"
say "order status, a join of two tables (view__order_status)"
query "SELECT * FROM $database.view__order_status ORDER BY order_id LIMIT 3 FORMAT PrettyCompactMonoBlock"

say "rebuilding pl__orders from retained history (stb build --select pipeline:pl__orders)"
"$stb" build --auto-approve --select pipeline:pl__orders --project-dir "$project" --vars "$vars"
wait_for_rows tbl__order_events $expected >/dev/null

say "stb test (SQL tests: model chains rebuilt from mocks, nothing created)"
tests_ok=yes
"$stb" test --project-dir "$project" --vars "$vars" || tests_ok=no

say "stb audit (SQL audits on the live relations)"
audits_ok=yes
"$stb" audit --project-dir "$project" --vars "$vars" || audits_ok=no

say "virtual deployments (examples/deployments): stage, promote, change, stage again, roll back"
# A copy, since the demo edits a model; its own database and landing on the same topic.
staged_project="$(mktemp -d)"
cp -R "$repo/examples/deployments/." "$staged_project/"
staged=orders_staged
query "DROP DATABASE IF EXISTS $staged SYNC" >/dev/null
stb_staged() { "$stb" "$@" --project-dir "$staged_project" --vars "$vars"; }
deployment_of() { python3 -c 'import json,sys; print(json.load(sys.stdin)["deployment_id"])'; }
stb_staged plan
first="$(stb_staged build --auto-approve --json | deployment_of)"
stb_staged deployment list
stb_staged deployment promote "$first"
# The landing reads the topic from its earliest message: all events reach the deployment.
staged_events="$(database=$staged wait_for_rows tbl__order_events $expected)"
large="$(query "SELECT count() FROM $staged.tbl__large_events")"
large_rule="$(query "SELECT countIf(amount_cents >= 2000) FROM $staged.tbl__order_events")"
say "raising the bar to 40.00 and staging a second deployment (only large_events changes)"
sed -i 's/amount_cents >= 2000/amount_cents >= 4000/' "$staged_project/pipelines/pl__staged/large_events.sql"
stb_staged plan
second="$(stb_staged build --auto-approve --json | deployment_of)"
say "stb deployment audit: the staged copies against the active ones, before promoting"
stb_staged deployment audit "$second"
audit_verdict="$(stb_staged deployment audit "$second" --json | python3 -c 'import json,sys; v=json.load(sys.stdin)["assessment"]; print("promotable" if v != "not_ready" else v)')"
before_promote="$(query "SELECT large_events FROM $staged.view__large_event_count")"
stb_staged deployment promote "$second"
raised="$(query "SELECT large_events FROM $staged.view__large_event_count")"
raised_rule="$(query "SELECT countIf(amount_cents >= 4000) FROM $staged.tbl__order_events")"
stb_staged deployment list
say "stb deployment rollback --previous"
stb_staged deployment rollback --previous --auto-approve
rolled_back="$(query "SELECT large_events FROM $staged.view__large_event_count")"
rm -rf "$staged_project"

say "checking"
events="$(query "SELECT count(), uniqExact(event_id) FROM $database.tbl__order_events FORMAT TSV")"
# The producer stamps events with the run's clock, so the 30-day retention keeps them all.
retained="$(query "SELECT count() FROM $database.raw__orders")"
paid="$(query "SELECT count(), uniqExact(order_id) FROM $database.tbl__paid_orders FORMAT TSV")"
revenue_gaps="$(query "SELECT count() FROM (SELECT customer_id, sum(revenue_cents) AS r FROM $database.tbl__customer_revenue GROUP BY customer_id) AS a FULL OUTER JOIN (SELECT customer_id, sum(amount_cents) AS p FROM $database.tbl__paid_orders GROUP BY customer_id) AS b USING customer_id WHERE r != p")"
status=0
check() { # name, actual, expected
  if [ "$2" = "$3" ]; then printf '  %-44s %s\n' "$1" "ok ($2)"; else printf '  %-44s %s\n' "$1" "FAILED (got $2, expected $3)"; status=1; fi
}
echo "Demo summary"
check "events produced" "$expected" "$expected"
check "landed events retained (30d retention)" "$retained" "$expected"
check "order events, each exactly once" "$(echo "$events" | tr '\t' ' ')" "$expected $expected"
check "paid orders, each exactly once" "$(echo "$paid" | tr '\t' ' ')" "$((expected / 3)) $((expected / 3))"
check "customers whose revenue differs from payments" "$revenue_gaps" "0"
check "virtual: events in the promoted deployment" "$staged_events" "$expected"
check "virtual: large events follow their rule" "$large" "$large_rule"
check "virtual: staged deployment audited" "$audit_verdict" "promotable"
check "virtual: readers untouched until promotion" "$before_promote" "$large_rule"
check "virtual: promoted rule applies" "$raised" "$raised_rule"
check "virtual: rollback restores the first" "$rolled_back" "$large_rule"
check "stb test passed" "$tests_ok" "yes"
check "stb audit passed" "$audits_ok" "yes"
if [ "$status" -eq 0 ]; then echo "Demo passed"; else echo "Demo FAILED"; fi
$stop_at_end || echo "The stack keeps running: explore it with curl \"$STB_LOCAL_CLICKHOUSE_URL/?query=...\"; stop it with: $stb local down"
exit "$status"
