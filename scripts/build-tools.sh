#!/usr/bin/env bash
# Builds the servers the system runs on from their Go modules, once per machine: the binaries are
# cached outside the clone, keyed by version, so a fresh clone (CI) reuses them. Prints nothing when
# what was asked for is present.
#
#   scripts/build-tools.sh                 every tool (what scripts/test needs)
#   scripts/build-tools.sh temporal weaviate   only those (scripts/start on its embedded defaults)
#
# Tools:
#   temporal        the Temporal CLI: dev server with its Web UI, and the operator's `temporal` command
#   weaviate        the Weaviate server
#   versitygw       Versity's S3 gateway (Apache-2.0), the S3-compatible object store of the tests and
#                   of the cluster profile
#   temporal-server the Temporal server itself (go.temporal.io/server, the version the CLI embeds), run
#                   on PostgreSQL in the cluster profile
#   temporal-sql-tool  its schema tool (temporal-sql-tool), which sets up and upgrades that schema
#   temporal-ui     the Temporal Web UI server (github.com/temporalio/ui-server, the one the CLI embeds)
#   temporal-time-skipping  a newer Temporal server whose workflows can skip time (the tests' time-skipping
#                   environment, test/support/time-skipping.ts; docs/testing.md)
set -euo pipefail

# Versions move together where they must: the server and its schema tool are one module, and the
# CLI v1.5.1 embeds exactly this server and UI, so dev server and cluster run the same Temporal.
TEMPORAL_CLI_VERSION=v1.5.1   # newest tag whose go.mod has no replace directive (go install works)
TEMPORAL_SERVER_VERSION=v1.29.1
TEMPORAL_UI_VERSION=v2.42.1
# Workflow time skipping (TimeSkippingConfig) is served from v1.32.0 on; v1.32.2 needs Go 1.26.10.
TEMPORAL_TIME_SKIPPING_VERSION=v1.32.1
WEAVIATE_VERSION=v1.39.0
VERSITYGW_VERSION=v1.8.0
TOOLS_DIR="${DWB_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dwb-tools}"

build() { # name version package binary
  local dir="$TOOLS_DIR/$1-$2"
  [ -x "$dir/$4" ] && return 0
  command -v go >/dev/null || { echo "Go is needed to build $1 once (install Go 1.25+)" >&2; exit 1; }
  echo "building $1 $2 from its Go module (first time on this machine: several minutes)..." >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  # Module checksums are verified against the checksum database as usual; never switch that off.
  CGO_ENABLED=0 GOTOOLCHAIN=local GOBIN="$dir.tmp" go install "$3@$2"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
}

tool() { # name
  case "$1" in
    temporal) build temporal "$TEMPORAL_CLI_VERSION" github.com/temporalio/cli/cmd/temporal temporal ;;
    weaviate) build weaviate "$WEAVIATE_VERSION" github.com/weaviate/weaviate/cmd/weaviate-server weaviate-server ;;
    versitygw) build versitygw "$VERSITYGW_VERSION" github.com/versity/versitygw/cmd/versitygw versitygw ;;
    temporal-server) build temporal-server "$TEMPORAL_SERVER_VERSION" go.temporal.io/server/cmd/server server ;;
    temporal-sql-tool) build temporal-sql-tool "$TEMPORAL_SERVER_VERSION" go.temporal.io/server/cmd/tools/sql sql ;;
    temporal-ui) build temporal-ui "$TEMPORAL_UI_VERSION" github.com/temporalio/ui-server/v2/cmd/server server ;;
    temporal-time-skipping) build temporal-server "$TEMPORAL_TIME_SKIPPING_VERSION" go.temporal.io/server/cmd/server server ;;
    *) echo "unknown tool: $1" >&2; exit 2 ;;
  esac
}

[ $# -gt 0 ] || set -- temporal weaviate versitygw temporal-server temporal-sql-tool temporal-ui temporal-time-skipping

# Two first runs at once (a test run and `scripts/start`) must not build into the same folders:
# the second waits for the first, then finds the binaries present.
mkdir -p "$TOOLS_DIR"
exec 9>"$TOOLS_DIR/.build.lock"
flock 9

# Two builds at a time: each compiles in parallel on its own, and two keep both cores busy while
# one of them links or waits on downloads. The Temporal server and its schema tool are one module at
# one version: built one after the other, the tool finds nearly all its packages in Go's build
# cache, where side by side both would compile them. (The CLI pins other versions of many shared
# dependencies, e.g. OpenTelemetry, so its packages do not serve the server's build.)
jobs=()
for name in "$@"; do
  case "$name" in
    temporal-sql-tool) [[ " $* " == *" temporal-server "* ]] || jobs+=("$name") ;;
    temporal-server) [[ " $* " == *" temporal-sql-tool "* ]] && jobs+=("temporal-server temporal-sql-tool") || jobs+=("$name") ;;
    *) jobs+=("$name") ;;
  esac
done
pids=()
for job in "${jobs[@]}"; do
  # shellcheck disable=SC2086 # a job is one or two tool names
  (for name in $job; do tool "$name"; done) &
  pids+=($!)
  if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for pid in "${pids[@]}"; do wait "$pid"; done
