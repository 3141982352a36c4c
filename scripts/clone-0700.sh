#!/usr/bin/env bash
# Issue #15: a checkout the `postgres` user cannot enter (as root under /root, or any `mktemp -d`).
# Copies this checkout (its tracked and untracked files, not what .gitignore ignores) into a fresh
# 0700 directory, installs, serves `pnpm example` until a curl gets an author back, stops it with
# SIGINT, then runs the README's test command there. CI runs its main leg this way.
#   scripts/clone-0700.sh [arguments for vitest run, passed on by pnpm test]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "clone-0700: FAILED: $*" >&2; exit 1; }

dir=$(mktemp -d)
chmod 700 "$dir"
example_pid=
# A process and all its descendants.
tree() { local child; echo "$1"; for child in $(pgrep -P "$1"); do tree "$child"; done; }
signal_tree() { kill "-$1" $(tree "$2") 2> /dev/null || true; }
cleanup() {
  if [ -n "$example_pid" ] && kill -0 "$example_pid" 2> /dev/null; then signal_tree KILL "$example_pid"; fi
  rm -rf "$dir"
}
trap cleanup EXIT
if [ "$(id -u)" = 0 ] && runuser -u postgres -- test -x "$dir" 2> /dev/null; then fail "postgres can enter $dir: not the case under test"; fi

echo "clone-0700: $(git -C "$src" rev-parse --short HEAD) and the uncommitted changes of $src into $dir (mode 0700)"
mkdir "$dir/repo"
(cd "$src" && git ls-files -z --cached --others --exclude-standard | tar --null --files-from=- --ignore-failed-read -cf - 2> /dev/null) |
  tar -xf - -C "$dir/repo" || fail "copy of $src"
cd "$dir/repo"
pnpm install --frozen-lockfile --reporter=silent || fail "pnpm install"

# `pnpm example` in a process group of its own, with job control (set -m): without it a background
# job starts with SIGINT ignored.
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
log="$dir/example.log"
set -m
PORT=$port pnpm example > "$log" 2>&1 &
example_pid=$!
set +m
for _ in $(seq 180); do
  grep -q 'curl -s http' "$log" && break
  kill -0 "$example_pid" 2> /dev/null || { cat "$log" >&2; fail "pnpm example exited before it served"; }
  sleep 1
done
grep -q 'curl -s http' "$log" || { cat "$log" >&2; fail "pnpm example printed no curl command within 180 s"; }
db_port=$(sed -n 's/.*embedded PostgreSQL on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
[ -n "$db_port" ] || { cat "$log" >&2; fail "pnpm example did not use an embedded PostgreSQL"; }
url=$(grep -o 'curl -s http[^ ]*' "$log" | head -1 | cut -d' ' -f3)
answer=$(curl -sS --fail --max-time 10 "$url") || { cat "$log" >&2; fail "curl $url"; }
echo "clone-0700: curl $url -> $answer"
echo "$answer" | grep -q '"name"' || fail "no author in the answer of $url"

# SIGINT to the example's own Node process. pnpm may start each script in a process group of its own
# (seen when it runs without a terminal, in the background of a new session), so a signal to pnpm's
# group can miss it; pnpm's processes exit once it has.
example_node=$(ps -o pid=,args= -p "$(tree "$example_pid" | paste -sd,)" | awk '$2 == "node" && /src\/main\.ts/ { print $1; exit }')
[ -n "$example_node" ] || { ps -o pid,args -p "$(tree "$example_pid" | paste -sd,)" >&2; fail "no node process of pnpm example found"; }
kill -INT "$example_node"
for _ in $(seq 30); do kill -0 "$example_pid" 2> /dev/null || break; sleep 1; done
if kill -0 "$example_pid" 2> /dev/null; then
  # What is left of it, and in which state, for whoever reads the failure.
  ps -o pid,ppid,pgid,stat,pcpu,etime,args -p "$(tree "$example_pid" | paste -sd,)" >&2
  cat "$log" >&2
  fail "pnpm example still runs 30 s after SIGINT"
fi
example_pid=
grep -q 'directory are gone' "$log" || { cat "$log" >&2; fail "pnpm example did not report a clean stop"; }
node -e 'require("net").connect(+process.argv[1],"127.0.0.1").on("connect",()=>process.exit(1)).on("error",()=>process.exit(0))' "$db_port" \
  || fail "the embedded PostgreSQL still listens on $db_port after the example stopped"
echo "clone-0700: pnpm example served and stopped cleanly"

pnpm test "$@" || fail "pnpm test $*"
echo "clone-0700: OK"
