#!/usr/bin/env bash
# Builds the Temporal CLI (dev server + Web UI) and the Weaviate server from their Go modules, once
# per machine: the binaries are cached outside the clone, keyed by version, so a fresh clone (CI)
# reuses them. Prints nothing when both are present.
set -euo pipefail

TEMPORAL_CLI_VERSION=v1.5.1   # newest tag whose go.mod has no replace directive (go install works)
WEAVIATE_VERSION=v1.39.0
TOOLS_DIR="${DWB_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dwb-tools}"

build() { # name version module binary
  local dir="$TOOLS_DIR/$1-$2"
  [ -x "$dir/$4" ] && return 0
  command -v go >/dev/null || { echo "Go is needed to build $1 once (install Go 1.24+)" >&2; exit 1; }
  echo "building $1 $2 from its Go module (first time on this machine: several minutes)..." >&2
  mkdir -p "$dir.tmp"
  # Module checksums are verified against the checksum database as usual; never switch that off.
  CGO_ENABLED=0 GOTOOLCHAIN=local GOBIN="$dir.tmp" go install "$3@$2"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
}

# Two first runs at once (a test run and `scripts/start`) must not build into the same folders:
# the second waits for the first, then finds the binaries present.
mkdir -p "$TOOLS_DIR"
exec 9>"$TOOLS_DIR/.build.lock"
flock 9

build temporal "$TEMPORAL_CLI_VERSION" github.com/temporalio/cli/cmd/temporal temporal &
build weaviate "$WEAVIATE_VERSION" github.com/weaviate/weaviate/cmd/weaviate-server weaviate-server &
wait -n && wait -n
