#!/usr/bin/env bash
# The package as a user installs it: packs packages/flushwave (its prepack builds dist/), prints the
# tarball's file list and checks it holds only dist/, README.md, LICENSE and package.json, installs
# it with postgres and pg from the registry into a scratch project outside the workspace, and runs
# there, against a fresh embedded PostgreSQL: consumer.mjs (ESM), consumer.cjs (CommonJS through
# Node's require(esm)), the `flushwave pull` bin, and `tsc --noEmit` on consumer.ts (types inferred
# from the schema).
#   scripts/consumer-test.sh [report.json]
# Writes a vitest-shaped JSON report when given a path, so that CI's summary names a failing step.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
report=${1:-}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
results=()
run() { # run <name> <command…>: one step, its outcome kept for the report
  local name=$1; shift
  local out
  if out=$("$@" 2>&1); then
    echo "consumer-test: ok: $name"; results+=("passed	$name	")
  else
    echo "consumer-test: FAILED: $name"; echo "$out" | tail -20
    results+=("failed	$name	$(echo "$out" | grep -v '^\s*at ' | tail -4 | tr '\n\t' '  ')")
  fi
  [ -n "$out" ] && echo "$out" | sed 's/^/    /' | tail -8
}

pack() {
  (cd packages/flushwave && pnpm pack --pack-destination "$scratch" > /dev/null) && tarball=$(ls "$scratch"/flushwave-*.tgz) &&
    echo "tarball $(basename "$tarball"):" && tar tzf "$tarball" | sort &&
    ! tar tzf "$tarball" | grep -vE '^package/(dist/.*\.(js|d\.ts|js\.map)|README\.md|LICENSE|package\.json)$'
}
run 'npm pack: only dist/, README.md, LICENSE and package.json in the tarball' pack
tarball=$(ls "$scratch"/flushwave-*.tgz 2>/dev/null)

install() {
  cp packages/flushwave/test/consumer/*.* "$scratch/" &&
    cd "$scratch" && echo '{ "name": "consumer", "private": true }' > package.json &&
    npm install --no-audit --no-fund --loglevel=error "$tarball" postgres@3.4.9 pg@8.23.1 typescript@5.9.3 @types/node@20 > /dev/null
}
run 'install the tarball in a scratch project outside the workspace' install
db() { (cd "$root/packages/devdb" && pnpm exec tsx src/with-database.ts -- "$@"); }
run 'ESM: node consumer.mjs' db sh -c "cd '$scratch' && node consumer.mjs"
run 'CommonJS: node consumer.cjs' db sh -c "cd '$scratch' && node consumer.cjs"
# The README's command as written, then the module it wrote compiled against the installed package.
pull="cd '$scratch' && node consumer.mjs > /dev/null && npx --no-install flushwave pull --url \"\$DATABASE_URL\" --out src/schema.ts &&
  grep -F \"Author: entity('author', {\" src/schema.ts &&
  ./node_modules/.bin/tsc --noEmit --strict --module nodenext --moduleResolution nodenext --target es2022 --types node src/schema.ts"
run 'bin: npx flushwave pull --url … --out src/schema.ts on the tables consumer.mjs made; the module compiles' db sh -c "$pull"
run 'types: tsc --noEmit on consumer.ts' sh -c "cd '$scratch' && ./node_modules/.bin/tsc -p tsconfig.json"

# An application on node-postgres alone: no postgres.js or knex installed, skipLibCheck off.
pg_only=$scratch/pg-only
install_pg_only() {
  mkdir -p "$pg_only" && cp packages/flushwave/test/consumer/pg-only/* "$pg_only/" &&
    cd "$pg_only" && echo '{ "name": "consumer-pg-only", "private": true, "type": "module" }' > package.json &&
    npm install --no-audit --no-fund --loglevel=error "$tarball" pg@8.23.1 @types/pg@8.23.1 typescript@5.9.3 @types/node@20 > /dev/null &&
    ! [ -e node_modules/postgres ] && ! [ -e node_modules/knex ]
}
run 'install the tarball with pg only (no postgres.js, no knex)' install_pg_only
run 'pg only: tsc (declarations compile without postgres.js or knex) and run against the database' \
  db sh -c "cd '$pg_only' && ./node_modules/.bin/tsc -p tsconfig.json && node out/consumer.js"

failed=0
for r in "${results[@]}"; do [ "${r%%	*}" = failed ] && failed=$((failed + 1)); done
if [ -n "$report" ]; then
  printf '%s\n' "${results[@]}" | node -e '
    const lines = require("fs").readFileSync(0, "utf8").split("\n").filter(Boolean).map((l) => l.split("\t"))
    const tests = lines.map(([status, title, message]) => ({ status, title, ancestorTitles: ["package consumer"], failureMessages: message ? [message] : [] }))
    const report = { numPassedTests: tests.filter((t) => t.status === "passed").length, numFailedTests: tests.filter((t) => t.status === "failed").length,
      testResults: [{ name: process.argv[1], status: tests.some((t) => t.status === "failed") ? "failed" : "passed", message: "", assertionResults: tests }] }
    require("fs").writeFileSync(process.argv[2], JSON.stringify(report))' "$root/scripts/consumer-test.sh" "$report"
fi
exit $((failed > 0))
