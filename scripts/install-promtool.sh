#!/usr/bin/env bash
# Builds the pinned promtool (Prometheus's rule checker and rule unit-test runner) from the Go module proxy into a
# per-version cache dir and prints its path (scripts/go-tool.sh).
#   scripts/install-promtool.sh                   -> builds if needed, prints the promtool binary's path on stdout
#   PROMETHEUS_VERSION=v0.3xx.y scripts/...       -> another pin (the cache dir is per version)
# Prometheus v3.Y.Z is published as the Go module version v0.3YY.Z (Prometheus's own convention for Go modules):
# v0.316.0 is Prometheus 3.16.0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/go-tool.sh"

PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
# promtool --version reads these, as Prometheus's release build (promu) sets them.
go_tool promtool "$PROMETHEUS_VERSION" github.com/prometheus/prometheus/cmd/promtool \
  "-s -w -X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION"
