#!/usr/bin/env bash
# Idempotent machine and checkout set-up shared by scripts/start and scripts/test. Quick when
# everything is in place: each step checks before it acts.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

say() { printf '[setup] %s\n' "$*" >&2; }

# 1. Node.js
node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)' \
  || { say "Node.js >= 20.19 is required (found $(node --version 2>/dev/null || echo none))"; exit 1; }

# 2. Debian packages: what the services run (scripts/runtime-packages.txt, the list the production
#    image installs) and what development and the tests need (scripts/dev-packages.txt)
missing=()
while read -r pkg; do
  [ -z "$pkg" ] || [ "${pkg:0:1}" = "#" ] && continue
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done < <(cat scripts/runtime-packages.txt scripts/dev-packages.txt)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 3. npm packages, reinstalled only when the lock file changed
lock_hash=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat node_modules/.setup-lock-hash 2>/dev/null)" != "$lock_hash" ]; then
  say "installing npm packages"
  # `npm ci` refuses this lock file: some platform packages of @swc/core are absent from the
  # registry, so the lock cannot list them. `npm install --no-save` installs exactly the lock.
  # onnxruntime-node's install script downloads from a host we cannot reach; its CPU binaries are
  # in the package already.
  ONNXRUNTIME_NODE_INSTALL=skip npm install --no-save --no-audit --no-fund --loglevel=error
  echo "$lock_hash" > node_modules/.setup-lock-hash
fi

# 4. The servers, built once per machine from their Go modules: the ones named as arguments
#    (scripts/start names what its profile runs), else every one (scripts/test)
scripts/build-tools.sh "$@"

# 4b. The weights of the local speech-to-text engine (Moonshine base), fetched once per machine into
#     the same cache by exact version, integrity checked
scripts/fetch-models.sh

# 5. Prisma client, regenerated when the schema changed
schema_hash=$( (cat prisma/schema.prisma; cat node_modules/.setup-lock-hash) | sha256sum | cut -d' ' -f1)
if [ "$(cat generated/.schema-hash 2>/dev/null)" != "$schema_hash" ]; then
  say "generating the Prisma client"
  scripts/prisma.sh generate >/dev/null
  echo "$schema_hash" > generated/.schema-hash
fi
