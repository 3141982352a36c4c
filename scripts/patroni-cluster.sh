#!/usr/bin/env bash
# Runs a command against a real PostgreSQL HA cluster on 127.0.0.1, from Debian's packages (installed
# if missing): one etcd, three Patroni 3.0 nodes each managing a PostgreSQL 15, and HAProxy in front.
#   scripts/patroni-cluster.sh pnpm exec vitest run packages/flushwave/test/cluster
#   scripts/patroni-cluster.sh            # no command: prints the exports, waits for Ctrl-C
# It starts everything in a fresh temp dir, waits until there is a leader, both replicas stream and
# (in synchronous mode) a synchronous standby is named, creates the application role and database,
# runs the command with the variables below, and stops everything it started, by PID, when the
# command ends or on Ctrl-C/failure. The temp dir is removed unless KEEP_CLUSTER=1.
#
# Exported to the command (user/password/database flushwave for the application, postgres/postgres
# for the superuser, e.g. for pg_wal_replay_pause() on a replica):
#   CLUSTER_PRIMARY_URL          through HAProxy's primary listener (OPTIONS /primary checks)
#   CLUSTER_REPLICA_URL          through HAProxy's replica listener (OPTIONS /replica, round robin)
#   CLUSTER_NODE_URLS            the three nodes directly, comma-separated, node1 first
#   CLUSTER_MULTIHOST_URL        postgres://u:p@127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3/flushwave
#                                ?target_session_attrs=primary (postgres.js's and libpq's syntax; not
#                                read-write: postgres.js 3.4 decides that from default_transaction_read_only,
#                                which PostgreSQL 14+ reports as off on a hot standby, so it took a replica)
#   CLUSTER_SUPERUSER_URL        superuser through the primary listener
#   CLUSTER_SUPERUSER_NODE_URLS  superuser on each node directly, comma-separated
#   CLUSTER_REST_URLS            the three Patroni REST APIs, comma-separated
#   CLUSTER_PATRONICTL           a command line: $CLUSTER_PATRONICTL list | switchover --force
#   CLUSTER_DIR                  configs, logs (nodeN/patroni.log, nodeN/pglog/), data (nodeN/data)
#   CLUSTER_SCRIPT               this script, for the node helpers below; CLUSTER_SYNC 1 or 0
# Node helpers, for tests while the cluster runs (they read CLUSTER_DIR; N is 1, 2 or 3):
#   "$CLUSTER_SCRIPT" leader            prints the leader's N
#   "$CLUSTER_SCRIPT" kill-postmaster N SIGKILL of the postmaster (PID from nodeN/data/postmaster.pid);
#                                       with primary_start_timeout 0 a killed leader fails over
#   "$CLUSTER_SCRIPT" kill-node N       SIGKILL of Patroni and postmaster: node death; the leader key
#                                       expires after ttl, then a replica takes over
#   "$CLUSTER_SCRIPT" restart-node N    starts node N's Patroni again (killing what is left of it);
#                                       it rejoins by itself (pg_rewind if needed)
#   "$CLUSTER_SCRIPT" status            prints roles, states, streaming count; exit 0 when healthy
#   "$CLUSTER_SCRIPT" wait-healthy [S]  waits (at most S s, default 60) until healthy again: call it
#                                       after each of these before the next scenario
# Replication lag on purpose: Patroni 3.0 resumes a paused WAL replay at its next loop (PostgreSQL
# 14+), so `$CLUSTER_PATRONICTL pause --wait` first (maintenance mode: no failover meanwhile), then
# select pg_wal_replay_pause() on a replica, ..., pg_wal_replay_resume(), `$CLUSTER_PATRONICTL resume --wait`.
# A switchover: $CLUSTER_PATRONICTL switchover --force (Patroni picks the synchronous standby;
# --candidate nodeN to choose). Measured here, with one insert every 100 ms, the writes stop for about
# 5 s after kill-postmaster of the leader, 10 s after kill-node, 3.5 s for a switchover.
# Settings from the environment: SYNC=0 for asynchronous replication (default synchronous_mode and
# synchronous_mode_strict); CLUSTER_BASE_PORT (default: first free of 55400, 55500, ... 56300; it
# uses base..base+23); CLUSTER_TTL=10 CLUSTER_LOOP_WAIT=2 CLUSTER_RETRY_TIMEOUT=4 (Patroni wants
# loop_wait + 2 * retry_timeout <= ttl); CLUSTER_PRIMARY_START_TIMEOUT=0 (Patroni's default 300
# restarts a crashed leader in place instead); CLUSTER_START_TIMEOUT=120 (s); KEEP_CLUSTER=1.
set -euo pipefail
bin=/usr/lib/postgresql/15/bin
self=$(readlink -f "$0")
psql() { PGCONNECT_TIMEOUT=2 "$bin/psql" -XAtq "$@"; }
die() { echo "patroni-cluster: $*" >&2; exit 1; }

# --- what one node is: its PIDs (checked against its command line, so that a stale postmaster.pid
# or patroni.pid whose PID was reused by some other process is never signalled)
is_ours() { [ -n "${1:-}" ] && [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' < "/proc/$1/cmdline" | grep -qF -- "$2"; }
pid_in() { local p; p=$(head -1 "$1" 2> /dev/null) && is_ours "$p" "$2" && echo "$p" || true; }
patroni_pid() { pid_in "$CLUSTER_DIR/node$1/patroni.pid" "node$1.yml"; }
postmaster_pid() { pid_in "$CLUSTER_DIR/node$1/data/postmaster.pid" "node$1/data"; }
signal() { [ -z "$2" ] || kill "-$1" "$2" 2> /dev/null || true; }
# printf's format for nodes 1, 2, 3 with port base + $2 + N, comma-separated
each() { local IFS=, n a=(); for n in 1 2 3; do a+=("$(printf "$1" $((base + $2 + n)))"); done; echo "${a[*]}"; }
# waits until none of the given PIDs is alive, at most $1 tenths of a second
wait_gone() {
  local n=$1 i p alive; shift
  for ((i = 0; i < n; i++)); do
    alive=; for p in "$@"; do kill -0 "$p" 2> /dev/null && alive=1; done
    [ -z "$alive" ] && return 0; sleep 0.1
  done; return 1
}

# Patroni runs as postgres (PostgreSQL refuses root) in a session of its own, so that a Ctrl-C in the
# terminal reaches only this script, which then stops everything in order. setpriv and setsid exec
# (no fork, unlike runuser), so $! is Patroni's own PID.
start_patroni() {
  (cd / && exec setsid setpriv --reuid=postgres --regid=postgres --init-groups env HOME="$CLUSTER_DIR/node$1" \
    /usr/bin/patroni "$CLUSTER_DIR/node$1.yml" >> "$CLUSTER_DIR/node$1/patroni.log" 2>&1 < /dev/null) &
  echo $! > "$CLUSTER_DIR/node$1/patroni.pid"; disown $!
}
kill_node() { signal KILL "$(patroni_pid "$1")"; signal KILL "$(postmaster_pid "$1")"; }

# --- health, from Patroni's REST API: /cluster for roles, the leader's /patroni for
# pg_stat_replication (Patroni 3.0.2's member state says "running", not whether a replica streams)
status() {
  node --input-type=module - "$SYNC" "$(each 'http://127.0.0.1:%s' 20)" <<'JS'
const [sync, rests] = [process.argv[2], process.argv[3].split(',')]
const get = async u => (await fetch(u, { signal: AbortSignal.timeout(1500) })).json()
let c; for (const r of rests) { c = await get(r + '/cluster').catch(() => null); if (c) break }
if (!c) { console.log('no REST API answers'); process.exit(1) }
const m = c.members, leader = m.find(x => x.role === 'leader' && x.state === 'running')
const p = leader ? await get(leader.api_url.replace(/\/patroni$/, '') + '/patroni').catch(() => ({})) : {}
const rep = p.replication ?? [], streaming = rep.filter(r => r.state === 'streaming').length
const syncs = rep.filter(r => r.sync_state === 'sync').length
const ok = leader && m.length === 3 && m.every(x => x.state === 'running') && streaming === 2 && (sync !== '1' || (syncs > 0 && m.some(x => x.role === 'sync_standby')))
console.log(m.map(x => `${x.name} ${x.role} ${x.state}`).join(', ') + `; streaming ${streaming}, sync ${syncs}`)
process.exit(ok ? 0 : 1)
JS
}
# waits for a command, at most $1 seconds (checked every 0.25 s); the last output is in $last
wait_for() {
  local limit=$1 i; shift; local end=$((SECONDS + limit))
  for ((i = 0; i < limit * 4; i++)); do
    last=$("$@" 2>&1) && return 0
    [ "$SECONDS" -lt "$end" ] || break; sleep 0.25
  done; return 1
}
logs_tail() {
  for n in 1 2 3; do echo "--- node$n/patroni.log"; tail -n 12 "$CLUSTER_DIR/node$n/patroni.log" 2> /dev/null; done
  echo "--- etcd.log"; tail -n 5 "$CLUSTER_DIR/etcd.log" 2> /dev/null; true
}
leader() { local l; l=$(status | grep -o 'node[123] leader' | cut -c5) || true; [ -n "$l" ] && echo "$l"; }

# --- node helpers, used by tests while the cluster runs
case "${1:-}" in leader | kill-postmaster | kill-node | restart-node | status | wait-healthy)
  [ -n "${CLUSTER_DIR:-}" ] && [ -r "$CLUSTER_DIR/cluster.env" ] || die "$1: CLUSTER_DIR is not a running cluster's dir"
  . "$CLUSTER_DIR/cluster.env"
  case "$1" in kill-postmaster | kill-node | restart-node) [[ "${2:-}" =~ ^[123]$ ]] || die "$1 N: N is 1, 2 or 3" ;; esac
  case "$1" in
    leader) leader ;;
    kill-postmaster) signal KILL "$(postmaster_pid "$2")" ;;
    kill-node) kill_node "$2" ;;
    restart-node) old=("$(patroni_pid "$2")" "$(postmaster_pid "$2")"); kill_node "$2"
      wait_gone 50 "${old[@]}" || true; start_patroni "$2" ;;
    status) status ;;
    wait-healthy) wait_for "${2:-60}" status || { echo "$last" >&2; exit 1; }; echo "$last" ;;
  esac
  exit ;;
esac

[ "$(id -u)" = 0 ] || die "run it as root: it installs packages and runs Patroni and PostgreSQL as postgres"
t0=${EPOCHREALTIME/./}
elapsed() { local d=$((${EPOCHREALTIME/./} - t0)); printf '%d.%d' $((d / 1000000)) $((d / 100000 % 10)); }

# --- install what is missing (Debian's packages; no service starts by itself here)
missing=$(for p in patroni etcd-server etcd-client haproxy postgresql-15; do
  dpkg-query -W -f='${Status}\n' "$p" 2> /dev/null | grep -q '^install ok installed' || echo "$p"; done)
if [ -n "$missing" ]; then
  echo "patroni-cluster: installing ${missing//$'\n'/ }" >&2
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing; } > /tmp/patroni-cluster-apt.log 2>&1 ||
    { tail -n 20 /tmp/patroni-cluster-apt.log >&2; die "apt-get install failed"; }
fi

# --- ports: base+0/1 etcd client/peer, +2/3 HAProxy primary/replica, +10+N PostgreSQL, +20+N REST
ports_free() { node -e 'const net = require("net"); (async () => { for (const o of [0, 1, 2, 3, 11, 12, 13, 21, 22, 23])
  await new Promise((ok, no) => { const s = net.createServer().once("error", no).listen(+process.argv[1] + o, "127.0.0.1", () => s.close(ok)) })
  })().catch(() => process.exit(1))' "$1"; }
if [ -n "${CLUSTER_BASE_PORT:-}" ]; then base=$CLUSTER_BASE_PORT; ports_free "$base" || die "ports $base..$((base + 23)) are not all free"
else for base in $(seq 55400 100 56300) none; do [ "$base" != none ] && ports_free "$base" && break; done
  [ "$base" != none ] || die "no free port range from 55400 to 56323: set CLUSTER_BASE_PORT"; fi
SYNC=${SYNC:-1}; [ "$SYNC" = 0 ] && sync=false || { SYNC=1; sync=true; }
ttl=${CLUSTER_TTL:-10} loop_wait=${CLUSTER_LOOP_WAIT:-2} retry_timeout=${CLUSTER_RETRY_TIMEOUT:-4}
[ $((loop_wait + 2 * retry_timeout)) -le "$ttl" ] || die "Patroni wants loop_wait + 2 * retry_timeout <= ttl"

# --- teardown: everything this script (or restart-node) started, by the PIDs in CLUSTER_DIR
teardown() {
  local rc=$? n p pids kids=
  trap - EXIT INT TERM
  set +e
  [ -n "${sleeper:-}" ] && kill "$sleeper" 2> /dev/null
  signal TERM "$(pid_in "$CLUSTER_DIR/haproxy.pid" "$CLUSTER_DIR")"
  # Patroni's own children (initdb, pg_basebackup, pg_rewind while they run) by parent PID, first
  for n in 1 2 3; do p=$(patroni_pid $n); [ -z "$p" ] || kids+=" $(pgrep -P "$p" | tr '\n' ' ')"; signal KILL "$p"; done
  for p in $kids; do signal TERM "$p"; done
  # SIGQUIT is PostgreSQL's immediate shutdown: the postmaster takes its backends down with it.
  # Twice, for a postmaster that Patroni was starting and that wrote postmaster.pid a moment late
  for _ in 1 2; do
    pids=$(for n in 1 2 3; do postmaster_pid $n; done)
    for p in $pids; do signal QUIT "$p"; done
    wait_gone 100 $pids || for p in $pids; do signal KILL "$p"; done
  done
  pids=$(for f in etcd haproxy; do pid_in "$CLUSTER_DIR/$f.pid" "$CLUSTER_DIR"; done)
  for p in $pids; do signal TERM "$p"; done
  wait_gone 50 $pids || for p in $pids; do signal KILL "$p"; done
  if [ "${KEEP_CLUSTER:-0}" = 1 ]; then echo "patroni-cluster: kept $CLUSTER_DIR" >&2; else rm -rf "$CLUSTER_DIR"; fi
  exit "$rc"
}
CLUSTER_DIR=$(mktemp -d /tmp/patroni-cluster.XXXXXX)
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
echo "base=$base SYNC=$SYNC" > "$CLUSTER_DIR/cluster.env"

# --- Patroni: the dcs section is the bootstrap's (it then lives in etcd), the rest is per node
cat > "$CLUSTER_DIR/patronictl.yml" <<YML
scope: flushwave
namespace: /flushwave/
etcd3: {hosts: '127.0.0.1:$base'}
YML
for n in 1 2 3; do
  mkdir -p "$CLUSTER_DIR/node$n/pglog"
  cat "$CLUSTER_DIR/patronictl.yml" - > "$CLUSTER_DIR/node$n.yml" <<YML
name: node$n
restapi: {listen: '127.0.0.1:$((base + 20 + n))', connect_address: '127.0.0.1:$((base + 20 + n))'}
watchdog: {mode: 'off'}
bootstrap:
  dcs:
    ttl: $ttl
    loop_wait: $loop_wait
    retry_timeout: $retry_timeout
    primary_start_timeout: ${CLUSTER_PRIMARY_START_TIMEOUT:-0}
    synchronous_mode: $sync
    synchronous_mode_strict: $sync
    postgresql:
      use_pg_rewind: true
      use_slots: true
      # wal_retrieve_retry_interval (default 5s): after a failover a replica's first attempt to
      # stream from the new primary fails until its slot exists there; in strict synchronous mode
      # the first commit waits for that retry
      parameters: {shared_buffers: 16MB, max_connections: 100, wal_keep_size: 128MB, max_wal_senders: 10,
        max_replication_slots: 10, wal_retrieve_retry_interval: 500ms}
  initdb: [{encoding: UTF8}, {locale: C}]
postgresql:
  listen: '127.0.0.1:$((base + 10 + n))'
  connect_address: '127.0.0.1:$((base + 10 + n))'
  data_dir: '$CLUSTER_DIR/node$n/data'
  bin_dir: '$bin'
  pgpass: '$CLUSTER_DIR/node$n/pgpass'
  basebackup: [{checkpoint: fast}]
  authentication:
    superuser: {username: postgres, password: postgres}
    replication: {username: replicator, password: replicator}
    rewind: {username: rewinder, password: rewinder}
  parameters: {unix_socket_directories: '$CLUSTER_DIR/node$n', logging_collector: 'on', log_directory: '$CLUSTER_DIR/node$n/pglog'}
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 scram-sha-256
    - host all all 127.0.0.1/32 scram-sha-256
YML
done
chown -R postgres: "$CLUSTER_DIR" && chmod 700 "$CLUSTER_DIR"

# --- etcd, single node; Patroni's etcd3 section speaks the v3 API (its etcd section would need --enable-v2)
(cd / && exec setsid etcd --name etcd1 --data-dir "$CLUSTER_DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$base" --advertise-client-urls "http://127.0.0.1:$base" \
  --listen-peer-urls "http://127.0.0.1:$((base + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((base + 1))" \
  --initial-cluster "etcd1=http://127.0.0.1:$((base + 1))" > "$CLUSTER_DIR/etcd.log" 2>&1 < /dev/null) &
echo $! > "$CLUSTER_DIR/etcd.pid"; disown $!
wait_for 20 curl -sf --max-time 2 "http://127.0.0.1:$base/health" || { logs_tail >&2; die "etcd did not start: $last"; }
for n in 1 2 3; do start_patroni $n; done

# --- HAProxy: OPTIONS health checks (a GET makes Patroni log a traceback per check); a server
# marked down has its sessions cut, so clients of a demoted primary notice at once; retries 0: a
# client whose server refuses is refused at once, not held through HAProxy's 1 s retry pauses
{ printf 'global\n  maxconn 500\ndefaults\n  mode tcp\n  retries 0\n  timeout connect 2s\n  timeout client 30m\n  timeout server 30m\n  timeout check 2s\n'
  for role in primary:$((base + 2)) replica:$((base + 3)); do
    printf 'listen %s\n  bind 127.0.0.1:%s\n  balance roundrobin\n  option httpchk OPTIONS /%s\n  http-check expect status 200\n' \
      "${role%:*}" "${role#*:}" "${role%:*}"
    printf '  default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions\n'
    for n in 1 2 3; do printf '  server node%s 127.0.0.1:%s check port %s\n' $n $((base + 10 + n)) $((base + 20 + n)); done
  done; } > "$CLUSTER_DIR/haproxy.cfg"
(cd / && exec setsid haproxy -db -f "$CLUSTER_DIR/haproxy.cfg" > "$CLUSTER_DIR/haproxy.log" 2>&1 < /dev/null) &
echo $! > "$CLUSTER_DIR/haproxy.pid"; disown $!

limit=${CLUSTER_START_TIMEOUT:-120}
wait_for "$limit" status || { logs_tail >&2; die "cluster not healthy after ${limit}s: $last"; }
healthy=$(elapsed) health=$last

# --- the application's role and database, then wait until HAProxy routes both listeners
app=flushwave:flushwave@127.0.0.1 su=postgres:postgres@127.0.0.1
wait_for 20 psql "postgres://$su:$((base + 2))/postgres" -c "select 1 where not pg_is_in_recovery()" ||
  { logs_tail >&2; die "HAProxy's primary listener: $last"; }
psql "postgres://$su:$((base + 2))/postgres" -c "create role flushwave login createdb password 'flushwave'" \
  -c "create database flushwave owner flushwave"
CLUSTER_PRIMARY_URL=postgres://$app:$((base + 2))/flushwave CLUSTER_REPLICA_URL=postgres://$app:$((base + 3))/flushwave
wait_for 20 psql "$CLUSTER_REPLICA_URL" -c "select 1 where pg_is_in_recovery()" || { logs_tail >&2; die "HAProxy's replica listener: $last"; }
CLUSTER_NODE_URLS=$(each "postgres://$app:%s/flushwave" 10)
CLUSTER_MULTIHOST_URL="postgres://flushwave:flushwave@$(each '127.0.0.1:%s' 10)/flushwave?target_session_attrs=primary"
CLUSTER_SUPERUSER_URL=postgres://$su:$((base + 2))/flushwave CLUSTER_SUPERUSER_NODE_URLS=$(each "postgres://$su:%s/flushwave" 10)
CLUSTER_REST_URLS=$(each 'http://127.0.0.1:%s' 20) CLUSTER_PATRONICTL="/usr/bin/patronictl -c $CLUSTER_DIR/patronictl.yml"
export CLUSTER_PRIMARY_URL CLUSTER_REPLICA_URL CLUSTER_NODE_URLS CLUSTER_MULTIHOST_URL CLUSTER_SUPERUSER_URL \
  CLUSTER_SUPERUSER_NODE_URLS CLUSTER_REST_URLS CLUSTER_PATRONICTL CLUSTER_DIR CLUSTER_SCRIPT=$self CLUSTER_SYNC=$SYNC
echo "patroni-cluster: healthy after $healthy s, ready after $(elapsed) s: $health" >&2
if [ $# -eq 0 ]; then
  for v in $(compgen -e | grep '^CLUSTER_' | sort); do printf "export %s='%s'\n" "$v" "${!v}"; done
  echo "patroni-cluster: running; Ctrl-C stops it" >&2
  sleep infinity & sleeper=$!
  wait "$sleeper" || true
else
  "$@"
fi
