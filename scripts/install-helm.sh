#!/usr/bin/env bash
# Builds the pinned helm from the Go module proxy into a per-version cache dir and prints its path.
# Idempotent: a second run finds the binary and only prints the path. Why build rather than download:
# the machines reach package registries only, and the Go module proxy serves helm's source as a module.
#   scripts/install-helm.sh            -> builds if needed, prints the helm binary's path on stdout
#   HELM_VERSION=v3.x.y scripts/...    -> another pin (the cache dir is per version)
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.21.4}"
CACHE_ROOT="${INTURN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/inturn}"
BIN_DIR="$CACHE_ROOT/helm-$HELM_VERSION/bin"
HELM="$BIN_DIR/helm"
# The Kubernetes version helm assumes when no cluster is asked (lint, template's .Capabilities): helm's release
# Makefile derives it from its k8s.io/client-go version (v0.36.x -> 1.36 for helm v3.21); a plain `go install`
# would leave the v1.20 fallback, which this chart's kubeVersion (>=1.29) refuses.
K8S_MAJOR="${HELM_K8S_MAJOR:-1}"
K8S_MINOR="${HELM_K8S_MINOR:-36}"
# helm reads its own version and default Kubernetes version from these ldflags, as its release Makefile sets them.
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=$K8S_MAJOR -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$K8S_MINOR"
done
STAMP="$BIN_DIR/.ldflags"

built() { [[ -x "$HELM" && -f "$STAMP" && "$(cat "$STAMP")" == "$ldflags" ]]; }

if built; then
  echo "$HELM"
  exit 0
fi

command -v go >/dev/null || { echo "install-helm: Go is needed (scripts/setup-system.sh installs it)" >&2; exit 1; }
mkdir -p "$BIN_DIR"
# A lock so that `make helm-check` and a pytest fixture starting at the same time build once, not twice.
exec 9>"$BIN_DIR/.lock"
flock 9
if ! built; then
  echo "install-helm: building helm $HELM_VERSION with go install (a few minutes the first time)..." >&2
  tmp="$(mktemp -d "$BIN_DIR/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # Building into a temp dir and renaming makes an interrupted build leave no half-written binary behind.
  CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS="${GOFLAGS:-} -trimpath" \
    go install -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
  mv "$tmp/helm" "$HELM"
  printf '%s' "$ldflags" >"$STAMP"
fi
echo "$HELM"
