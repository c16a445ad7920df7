#!/usr/bin/env bash
# Installs the system packages inturn's local stack needs, when missing (idempotent, quiet when done).
# Java 17+ (Kafka, Spark) with its compiler (the benchmark reads the broker's JMX counters with a single-file Java program), Maven (resolves the Kafka jars), PostgreSQL's server, the Pub/Sub emulator, chromium and wrk.
set -euo pipefail

need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v runuser >/dev/null 2>&1 || need+=(util-linux)
command -v chromium >/dev/null 2>&1 || need+=(chromium)  # headless check of the Spark HTML report
command -v wrk >/dev/null 2>&1 || need+=(wrk)  # the webhook benchmark's load generator

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing system packages: ${need[*]} (run as root, or install them: apt-get install ${need[*]})" >&2
    exit 1
  fi
  echo "setup: apt-get install ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # Debian starts a cluster on install; inturn runs its own servers, so stop the packaged one.
  if printf '%s\n' "${need[@]}" | grep -qx postgresql; then service postgresql stop >/dev/null 2>&1 || true; fi
fi

if ! command -v gcloud >/dev/null 2>&1 || [ ! -d "$(dirname "$(readlink -f "$(command -v gcloud)")")/../platform/pubsub-emulator" ]; then
  echo "setup: the gcloud Pub/Sub emulator is missing (google-cloud-cli with the pubsub-emulator component);" >&2
  echo "setup: tests that need it will fail to start it" >&2
fi
