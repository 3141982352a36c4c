#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL 15 from Debian's packages (/usr/lib/postgresql/15):
#   scripts/postgres15.sh pnpm exec vitest run packages/flushwave
# It starts the server on a free loopback port in a fresh temp dir, exports DATABASE_URL for the
# command, and stops and removes the server afterwards. Runs the server as `postgres` when root.
set -euo pipefail
bin=/usr/lib/postgresql/15/bin
[ -x "$bin/postgres" ] || { echo "PostgreSQL 15 is not installed (apt-get install postgresql-15)" >&2; exit 1; }
dir=$(mktemp -d)
chmod 755 "$dir"
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
mkdir "$dir/data" && [ "$(id -u)" = 0 ] && chown postgres "$dir" "$dir/data"
as_pg "$bin/initdb" -D "$dir/data" -U flushwave --auth=trust > "$dir/initdb.log"
as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "-c listen_addresses=127.0.0.1 -p $port -k $dir" -w start > /dev/null
cleanup() { as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop > /dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
export DATABASE_URL="postgres://flushwave@127.0.0.1:$port/postgres"
echo "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') at $DATABASE_URL" >&2
"$@"
