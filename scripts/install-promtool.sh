#!/usr/bin/env bash
# Builds the pinned promtool (Prometheus's rule checker and rule unit-test runner) from the Go module proxy into a
# per-version cache dir and prints its path, as scripts/install-helm.sh does for helm. Idempotent: a second run finds
# the binary and only prints the path.
#   scripts/install-promtool.sh                   -> builds if needed, prints the promtool binary's path on stdout
#   PROMETHEUS_VERSION=v0.3xx.y scripts/...       -> another pin (the cache dir is per version)
# Prometheus v3.Y.Z is published as the Go module version v0.3YY.Z (Prometheus's own convention for Go modules):
# v0.316.0 is Prometheus 3.16.0.
set -euo pipefail

PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
CACHE_ROOT="${INTURN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/inturn}"
BIN_DIR="$CACHE_ROOT/promtool-$PROMETHEUS_VERSION/bin"
PROMTOOL="$BIN_DIR/promtool"
# promtool --version reads these, as Prometheus's release build (promu) sets them.
ldflags="-s -w -X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION"
STAMP="$BIN_DIR/.ldflags"

built() { [[ -x "$PROMTOOL" && -f "$STAMP" && "$(cat "$STAMP")" == "$ldflags" ]]; }

if built; then
  echo "$PROMTOOL"
  exit 0
fi

command -v go >/dev/null || { echo "install-promtool: Go is needed (scripts/setup-system.sh installs it)" >&2; exit 1; }
mkdir -p "$BIN_DIR"
# A lock so that `make helm-check` and a pytest fixture starting at the same time build once, not twice.
exec 9>"$BIN_DIR/.lock"
flock 9
if ! built; then
  echo "install-promtool: building promtool $PROMETHEUS_VERSION with go install (a few minutes the first time)..." >&2
  tmp="$(mktemp -d "$BIN_DIR/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # Building into a temp dir and renaming makes an interrupted build leave no half-written binary behind.
  CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS="${GOFLAGS:-} -trimpath" \
    go install -ldflags "$ldflags" "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION" >&2
  mv "$tmp/promtool" "$PROMTOOL"
  printf '%s' "$ldflags" >"$STAMP"
fi
echo "$PROMTOOL"
