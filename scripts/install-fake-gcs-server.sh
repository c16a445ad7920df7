#!/usr/bin/env bash
# Builds the pinned fake-gcs-server (a local Google Cloud Storage server: the report's gs:// tests start it on a
# loopback port) from the Go module proxy into a per-version cache dir and prints its path (scripts/go-tool.sh).
#   scripts/install-fake-gcs-server.sh                         -> builds if needed, prints the binary's path
#   FAKE_GCS_SERVER_VERSION=v1.x.y scripts/...                 -> another pin (the cache dir is per version)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/go-tool.sh"

FAKE_GCS_SERVER_VERSION="${FAKE_GCS_SERVER_VERSION:-v1.56.1}"
go_tool fake-gcs-server "$FAKE_GCS_SERVER_VERSION" github.com/fsouza/fake-gcs-server "-s -w"
