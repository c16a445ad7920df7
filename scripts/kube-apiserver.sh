#!/usr/bin/env bash
# A real Kubernetes API server (etcd + kube-apiserver, no kubelet, no controller manager) on loopback, for the
# chart's server-side checks (tests/helm/test_chart_apiserver.py).
#   scripts/kube-apiserver.sh build        -> builds kube-apiserver if needed, prints the binary's path
#   scripts/kube-apiserver.sh start DIR    -> installs etcd-server with apt if missing, makes the PKI in DIR, starts
#                                            etcd and kube-apiserver on free loopback ports, waits for /readyz, writes
#                                            DIR/kubeconfig, DIR/env (APISERVER_URL, ADMIN_TOKEN, pids); prints DIR
#   scripts/kube-apiserver.sh stop DIR     -> stops what `start DIR` started (by the pids it recorded)
# Why build: the machines reach package registries only. k8s.io/kubernetes replaces its staging modules with
# ./staging paths, so it cannot be `go install`ed; a wrapper module requires it and maps each staging module to its
# published v0.x.y. The first build takes about 4 minutes on 2 cores (peak about 1.7 GB); later calls print the path.
set -euo pipefail

K8S_VERSION="${KUBE_APISERVER_VERSION:-v1.34.4}"
STAGING_VERSION="v0.${K8S_VERSION#v1.}"
CACHE_ROOT="${INTURN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/inturn}"
BIN_DIR="$CACHE_ROOT/kube-apiserver-$K8S_VERSION"
APISERVER="$BIN_DIR/kube-apiserver"

build() {
  if [[ -x "$APISERVER" ]]; then
    echo "$APISERVER"
    return
  fi
  command -v go >/dev/null || { echo "kube-apiserver: Go is needed (scripts/setup-system.sh installs it)" >&2; exit 1; }
  mkdir -p "$BIN_DIR"
  exec 9>"$BIN_DIR/.lock"
  flock 9
  if [[ ! -x "$APISERVER" ]]; then
    echo "kube-apiserver: building $K8S_VERSION from the Go module proxy (about 4 minutes the first time)..." >&2
    local src gomod
    src="$(mktemp -d "$BIN_DIR/.build.XXXXXX")"
    trap 'rm -rf "$src"' EXIT
    gomod="$(cd "$src" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
    {
      echo "module inturn.local/kube-apiserver"
      echo
      grep -E '^go [0-9]' "$gomod"
      grep -E '^godebug ' "$gomod" || true
      echo
      echo "require k8s.io/kubernetes $K8S_VERSION"
      echo
      echo "replace ("
      # Each `k8s.io/x => ./staging/src/k8s.io/x` of kubernetes' go.mod becomes `k8s.io/x => k8s.io/x v0.y.z`.
      sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$STAGING_VERSION"'#p' "$gomod"
      echo ")"
    } >"$src/go.mod"
    cat >"$src/main.go" <<'EOF'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	command := app.NewAPIServerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
EOF
    local minor="${K8S_VERSION#v1.}"
    minor="${minor%%.*}"
    local p=k8s.io/component-base/version
    # Without the -X flags the server reports v0.0.0-master and charts with a kubeVersion constraint fail.
    (cd "$src" && go mod tidy >&2 && CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor" -o "$src/kube-apiserver" . >&2)
    mv "$src/kube-apiserver" "$APISERVER"
  fi
  echo "$APISERVER"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

pki() {
  local p="$1"
  mkdir -p "$p"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=inturn-test-ca" \
    -keyout "$p/ca.key" -out "$p/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout "$p/apiserver.key" -out "$p/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n' >"$p/san.ext"
  openssl x509 -req -in "$p/apiserver.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 2 \
    -extfile "$p/san.ext" -out "$p/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
  openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
  local token
  token="$(openssl rand -hex 24)"
  echo "$token,inturn-admin,inturn-admin,system:masters" >"$p/tokens.csv"
  echo "$token"
}

wait_ready() {
  local url="$1" ca="$2" token="$3" pid="$4" deadline=$((SECONDS + 60))
  until curl -fsS --cacert "$ca" -H "Authorization: Bearer $token" "$url/readyz" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { echo "kube-apiserver: the server exited; see its log" >&2; return 1; }
    ((SECONDS < deadline)) || { echo "kube-apiserver: not ready within 60 s" >&2; return 1; }
    sleep 0.2
  done
}

start() {
  local dir="$1"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  local apiserver
  apiserver="$(build)"
  if ! command -v etcd >/dev/null; then
    if [[ "$(id -u)" != 0 ]]; then
      echo "kube-apiserver: etcd is missing (apt-get install etcd-server, as root)" >&2
      exit 1
    fi
    echo "kube-apiserver: apt-get install etcd-server" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server >/dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server >/dev/null; }
    # Debian may start a packaged etcd on install; this script runs its own.
    service etcd stop >/dev/null 2>&1 || true
  fi
  local token client peer secure
  token="$(pki "$dir/pki")"
  client="$(free_port)"
  peer="$(free_port)"
  secure="$(free_port)"
  etcd --name default --data-dir "$dir/etcd-data" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "default=http://127.0.0.1:$peer" >"$dir/etcd.log" 2>&1 &
  local etcd_pid=$!
  local p="$dir/pki"
  "$apiserver" --etcd-servers="http://127.0.0.1:$client" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
    --secure-port="$secure" --cert-dir="$dir/certs" \
    --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" --client-ca-file="$p/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
    --service-cluster-ip-range=10.96.0.0/16 --authorization-mode=RBAC --token-auth-file="$p/tokens.csv" \
    --enable-priority-and-fairness=false >"$dir/apiserver.log" 2>&1 &
  local api_pid=$!
  local url="https://127.0.0.1:$secure"
  cat >"$dir/env" <<EOF
APISERVER_URL=$url
ADMIN_TOKEN=$token
CA_FILE=$p/ca.crt
ETCD_PID=$etcd_pid
APISERVER_PID=$api_pid
EOF
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: $url
    certificate-authority: $p/ca.crt
users:
- name: admin
  user:
    token: $token
contexts:
- name: test
  context:
    cluster: test
    user: admin
current-context: test
EOF
  chmod 600 "$dir/kubeconfig" "$dir/env"
  if ! wait_ready "$url" "$p/ca.crt" "$token" "$api_pid"; then
    tail -n 20 "$dir/apiserver.log" >&2 || true
    stop "$dir"
    exit 1
  fi
  echo "$dir"
}

stop() {
  local dir="$1" pid
  [[ -f "$dir/env" ]] || return 0
  for var in APISERVER_PID ETCD_PID; do
    pid="$(sed -n "s/^$var=//p" "$dir/env")"
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
}

case "${1:-}" in
  build) build ;;
  start) start "${2:?usage: $0 start DIR}" ;;
  stop) stop "${2:?usage: $0 stop DIR}" ;;
  *)
    echo "usage: $0 build | start DIR | stop DIR" >&2
    exit 2
    ;;
esac
