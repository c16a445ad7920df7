#!/usr/bin/env bash
# One pinned Go tool built from the Go module proxy into a per-version cache dir; prints the binary's path.
# Sourced by the installers (install-helm.sh, install-promtool.sh), which say what to build:
#   go_tool NAME VERSION PACKAGE LDFLAGS    e.g. go_tool helm v3.21.4 helm.sh/helm/v3/cmd/helm "-s -w ..."
# Idempotent: a second run finds the binary (built with the same ldflags) and only prints the path. Why build
# rather than download: the machines reach package registries only, and the Go module proxy serves the source.

go_tool() {
  local name="$1" version="$2" package="$3" ldflags="$4"
  local cache_root="${INTURN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/inturn}"
  local bin_dir="$cache_root/$name-$version/bin"
  local binary="$bin_dir/$name" stamp="$bin_dir/.ldflags"
  built() { [[ -x "$binary" && -f "$stamp" && "$(cat "$stamp")" == "$ldflags" ]]; }
  if built; then
    echo "$binary"
    return 0
  fi
  command -v go >/dev/null || { echo "install-$name: Go is needed (scripts/setup-system.sh installs it)" >&2; return 1; }
  mkdir -p "$bin_dir"
  # A lock so that `make helm-check` and a pytest fixture starting at the same time build once, not twice.
  exec 9>"$bin_dir/.lock"
  flock 9
  if ! built; then
    echo "install-$name: building $name $version with go install (a few minutes the first time)..." >&2
    local tmp
    tmp="$(mktemp -d "$bin_dir/.build.XXXXXX")"
    # Building into a temp dir and renaming makes an interrupted build leave no half-written binary behind.
    if ! CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS="${GOFLAGS:-} -trimpath" go install -ldflags "$ldflags" "$package@$version" >&2
    then
      rm -rf "$tmp"
      return 1
    fi
    mv "$tmp/$name" "$binary"
    rm -rf "$tmp"
    printf '%s' "$ldflags" >"$stamp"
  fi
  echo "$binary"
}
