#!/usr/bin/env bash
# Runs a command with a PgBouncer (Debian's package) in transaction pooling mode in front of
# DATABASE_URL (which must be set, e.g. by scripts/postgres15.sh):
#   DATABASE_URL=postgres://… scripts/pgbouncer.sh pnpm exec vitest run …/conformance.test.ts
# It exports PGBOUNCER_URL (same user and database, through PgBouncer) and PGBOUNCER_ADMIN_URL (the
# admin console, database `pgbouncer`; the user is in admin_users, so KILL/RESUME work: the PgBouncer
# fault test uses them) for the command, and stops PgBouncer afterwards. PgBouncer refuses to run as
# root: as root it runs as `postgres`.
set -euo pipefail
command -v pgbouncer > /dev/null || { echo "PgBouncer is not installed (apt-get install pgbouncer)" >&2; exit 1; }
: "${DATABASE_URL:?set DATABASE_URL to the PostgreSQL PgBouncer should sit in front of}"
dir=$(mktemp -d)
chmod 755 "$dir"
read -r host port user <<< "$(node -e 'const u=new URL(process.env.DATABASE_URL);console.log(u.hostname,u.port||5432,decodeURIComponent(u.username))')"
listen=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
cat > "$dir/pgbouncer.ini" <<INI
[databases]
* = host=$host port=$port
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $listen
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
admin_users = $user
pool_mode = transaction
max_client_conn = 200
default_pool_size = 10
ignore_startup_parameters = extra_float_digits,search_path
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
echo "\"$user\" \"\"" > "$dir/users.txt"
as_pg() { if [ "$(id -u)" = 0 ]; then chown -R postgres "$dir"; runuser -u postgres -- "$@"; else "$@"; fi; }
as_pg pgbouncer -d "$dir/pgbouncer.ini"
cleanup() { kill "$(cat "$dir/pgbouncer.pid" 2>/dev/null)" 2> /dev/null || true; sleep 0.2; rm -rf "$dir"; }
trap cleanup EXIT
for _ in $(seq 50); do node -e 'require("net").connect(+process.argv[1],"127.0.0.1").on("connect",()=>process.exit(0)).on("error",()=>process.exit(1))' "$listen" && break; sleep 0.1; done
export PGBOUNCER_URL=$(node -e 'const u=new URL(process.env.DATABASE_URL);u.port=process.argv[1];console.log(u.toString())' "$listen")
export PGBOUNCER_ADMIN_URL=$(node -e 'const u=new URL(process.env.PGBOUNCER_URL);u.pathname="/pgbouncer";console.log(u.toString())')
echo "PgBouncer $(pgbouncer --version | head -1 | awk '{print $2}') (transaction pooling) at $PGBOUNCER_URL" >&2
"$@"
