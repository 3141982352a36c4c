#!/usr/bin/env bash
# Issue #15: a checkout the `postgres` user cannot enter (as root under /root, or any `mktemp -d`).
# Clones this checkout's HEAD into a fresh 0700 directory, installs, serves `pnpm example` until a
# curl gets an author back, stops it with SIGINT, then runs one e2e test file there.
#   scripts/clone-0700.sh [vitest run arguments]   (default packages/flushwave/test/e2e/flush.test.ts)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
[ $# -gt 0 ] || set -- packages/flushwave/test/e2e/flush.test.ts
fail() { echo "clone-0700: FAILED: $*" >&2; exit 1; }

dir=$(mktemp -d)
chmod 700 "$dir"
example_pid=
cleanup() {
  if [ -n "$example_pid" ] && kill -0 "$example_pid" 2> /dev/null; then kill -KILL -- "-$example_pid" 2> /dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
if [ "$(id -u)" = 0 ] && runuser -u postgres -- test -x "$dir" 2> /dev/null; then fail "postgres can enter $dir: not the case under test"; fi

rev=$(git -C "$src" rev-parse HEAD)
echo "clone-0700: $rev into $dir (mode 0700)"
git clone --quiet --no-checkout "$src" "$dir/repo"
git -C "$dir/repo" checkout --quiet --detach "$rev"
cd "$dir/repo"
pnpm install --frozen-lockfile --reporter=silent || fail "pnpm install"

# `pnpm example` in a process group of its own, so SIGINT reaches it as Ctrl-C in a terminal would.
# Job control (set -m) for that: without it a background job ignores SIGINT, and pnpm then relays none.
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

kill -INT -- "-$example_pid"
for _ in $(seq 30); do kill -0 "$example_pid" 2> /dev/null || break; sleep 1; done
kill -0 "$example_pid" 2> /dev/null && { cat "$log" >&2; fail "pnpm example still runs 30 s after SIGINT"; }
example_pid=
grep -q 'directory are gone' "$log" || { cat "$log" >&2; fail "pnpm example did not report a clean stop"; }
node -e 'require("net").connect(+process.argv[1],"127.0.0.1").on("connect",()=>process.exit(1)).on("error",()=>process.exit(0))' "$db_port" \
  || fail "the embedded PostgreSQL still listens on $db_port after the example stopped"
echo "clone-0700: pnpm example served and stopped cleanly"

pnpm exec vitest run "$@" || fail "vitest run $*"
echo "clone-0700: OK"
