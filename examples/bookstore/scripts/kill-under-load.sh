#!/usr/bin/env bash
# The example under load while an operator ends its pooled backends: starts `pnpm example` on the
# embedded database (EXECUTOR=postgres|pg|knex), runs `pnpm --filter bookstore load` (HANDLER, 12 s,
# CONNECTIONS concurrent requests, default 10) and, meanwhile, pg_terminate_backend on every client backend of the example's
# database every 500 ms; then 20 GETs to see that it recovered without a restart, and the count of
# 500s in the app's log. Needs psql (PSQL to point at one) and ss. Loopback only; bounded in time.
#   examples/bookstore/scripts/kill-under-load.sh postgres review
set -u
cd "$(dirname "$0")/../../.."
executor=${1:-postgres}; handler=${2:-review}; port=${PORT:-3117}
psql=${PSQL:-$(command -v psql || echo /usr/lib/postgresql/15/bin/psql)}
log=$(mktemp)
listeners() { ss -ltnp | grep postgres | grep -o '127.0.0.1:[0-9]*' | sort; }
before=$(listeners)
PORT=$port EXECUTOR=$executor pnpm example > "$log" 2>&1 &
for _ in $(seq 60); do curl -s -o /dev/null "http://127.0.0.1:$port/authors/1" && break; sleep 1; done
# The example's embedded database is the PostgreSQL that started listening since.
dbport=$(comm -13 <(echo "$before") <(listeners) | cut -d: -f2 | head -1)
# Stops the example by the process listening on its port (never by name: other tools run src/main.ts too).
stop() { local pid; pid=$(ss -ltnpH "sport = :$port" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2); [ -n "$pid" ] && kill -INT "$pid"; sleep 2; }
[ -n "$dbport" ] || { echo "could not find the example's database (see $log)"; stop; exit 1; }
echo "example on :$port ($executor), its database on :$dbport"
(
  end=$((SECONDS + 12)); killed=0
  while [ $SECONDS -lt $end ]; do
    n=$(PGPASSWORD=flushwave "$psql" -h 127.0.0.1 -p "$dbport" -U flushwave -d flushwave -Atc \
      "select count(pg_terminate_backend(pid)) from pg_stat_activity where backend_type = 'client backend' and pid <> pg_backend_pid() and datname = current_database()" 2>/dev/null)
    killed=$((killed + ${n:-0})); sleep 0.5
  done
  echo "backends terminated: $killed"
) &
killer=$!
PORT=$port HANDLER=$handler DURATION=12 CONNECTIONS=${CONNECTIONS:-10} pnpm --filter bookstore load 2>&1 | grep -E "^(requests|latency|status|round trips)"
wait $killer
ok=0; for _ in $(seq 20); do [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/authors/1")" = 200 ] && ok=$((ok + 1)); done
echo "after the storm: $ok of 20 GETs answered 200"
echo "internal errors (500) in the app's log: $(grep -cE '"statusCode":500|"msg":"unexpected error"' "$log")"
stop
rm -f "$log"
