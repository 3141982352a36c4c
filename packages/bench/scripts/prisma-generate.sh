#!/usr/bin/env sh
# Generates the Prisma client of the bench (prisma/schema.prisma → src/generated/prisma, gitignored).
#
# Why the env vars: before generating, the Prisma 7.10 CLI makes sure its native schema engine
# exists and otherwise downloads it from binaries.prisma.sh (not a package registry), which fails
# here with `getaddrinfo ENOTFOUND binaries.prisma.sh`. `prisma generate` never runs that engine (it
# parses the schema and writes the client with the WebAssembly modules shipped in the `prisma`
# package), and the v7 client runs on the `pg` driver adapter with no native engine at all.
# PRISMA_SCHEMA_ENGINE_BINARY is the CLI's override for the engine's path (read in
# prisma/build/cli.js, @prisma/fetch-engine's env lookup): when it is set, the CLI uses that path
# and skips the download, provided the path exists (otherwise it throws "Env var
# PRISMA_SCHEMA_ENGINE_BINARY is provided but provided path … can't be resolved"). It is pointed at
# /dev/null on purpose: nothing executable, so any command that really needs the schema engine
# (migrate, db push, introspection) fails loudly instead of running something else. Never use those
# here anyway: the harness creates the tables (src/schema.ts).
# CHECKPOINT_DISABLE=1 stops the CLI's version-check request to checkpoint.prisma.io.
set -eu
cd "$(dirname "$0")/.."
export PRISMA_SCHEMA_ENGINE_BINARY="${PRISMA_SCHEMA_ENGINE_BINARY:-/dev/null}"
export CHECKPOINT_DISABLE=1
export PRISMA_HIDE_UPDATE_MESSAGE=1
exec pnpm exec prisma generate --schema prisma/schema.prisma
