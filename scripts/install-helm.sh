#!/usr/bin/env bash
# Builds the pinned helm from the Go module proxy into a per-version cache dir and prints its path (scripts/go-tool.sh).
#   scripts/install-helm.sh            -> builds if needed, prints the helm binary's path on stdout
#   HELM_VERSION=v3.x.y scripts/...    -> another pin (the cache dir is per version)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/go-tool.sh"

HELM_VERSION="${HELM_VERSION:-v3.21.4}"
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
go_tool helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm "$ldflags"
