#!/usr/bin/env bash
# Runs the project's Prisma CLI offline: `scripts/prisma.sh <prisma args...>`
#   e.g. scripts/prisma.sh generate
#        scripts/prisma.sh migrate deploy
#        scripts/prisma.sh migrate status
#        scripts/prisma.sh migrate diff --from-migrations prisma/migrations --to-schema prisma/schema.prisma --exit-code
#
# The Prisma 7 CLI downloads a native `schema-engine` binary for every command, which fails
# without internet access. PRISMA_SCHEMA_ENGINE_BINARY points it at scripts/prisma-schema-engine.mjs
# instead, a drop-in that runs the same engine compiled to WebAssembly (npm package
# @prisma/schema-engine-wasm) over node-postgres. See the comments at the top of that file.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

export PRISMA_SCHEMA_ENGINE_BINARY="$ROOT/scripts/prisma-schema-engine.mjs"
# No phoning home: CHECKPOINT_DISABLE turns off the CLI's update check and telemetry ping
# (checkpoint.prisma.io); PRISMA_HIDE_UPDATE_MESSAGE silences the "update available" banner.
export CHECKPOINT_DISABLE=1
export PRISMA_HIDE_UPDATE_MESSAGE=1
# Local development database unless the caller says otherwise.
export DATABASE_URL="${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/dwb_dev}"

# The CLI looks for prisma.config.ts in the working directory: run from the repo root (relative
# paths in the arguments are therefore relative to the repo root).
cd "$ROOT"
exec "$ROOT/node_modules/.bin/prisma" "$@"
