#!/usr/bin/env bash
# Did the report change since `make test-compat` last passed? Exit 0 (and say "changed") when it did, so CI runs
# `make test-compat`; exit 1 ("unchanged") when it did not; exit 2 on a usage error.
#
# The report is what `make test-compat` tests: spark_jobs/, tests/reports/ and pyproject.toml (the supported PySpark
# range). Its fingerprint is the hash git gives those paths in the commit checked out (HEAD: a clean clone has only
# that and its history, so the answer needs neither a branch nor a merge base). `make test-compat` records the
# fingerprint it passed on in .ci/test-compat-passed (`--record`), a tracked file committed with the change; CI
# compares HEAD's with it. A missing or different record means changed.
#
# INTURN_REPORT_CHANGED_SINCE=<commit> decides from a range instead: changed when those paths differ between that
# commit and HEAD (for a CI that knows the last commit it tested). Uncommitted changes are not looked at.
set -euo pipefail
cd "$(dirname "$0")/.."
paths=(spark_jobs tests/reports pyproject.toml)
record=.ci/test-compat-passed

fingerprint() {
  # One line per path (its object id in HEAD's tree, or "absent"), hashed together.
  for path in "${paths[@]}"; do
    printf '%s %s\n' "$path" "$(git rev-parse --verify --quiet "HEAD:$path" || echo absent)"
  done | git hash-object --stdin
}

case "${1:-}" in
  --record)
    if ! git diff --quiet HEAD -- "${paths[@]}"; then
      echo "not recorded: ${paths[*]} have uncommitted changes (the record is of HEAD)" >&2
      exit 0
    fi
    fingerprint > "$record"
    echo "recorded $(cat "$record") in $record"
    exit 0
    ;;
  --print)
    fingerprint
    exit 0
    ;;
  "") ;;
  *)
    echo "usage: $0 [--record | --print]" >&2
    exit 2
    ;;
esac

if [[ -n "${INTURN_REPORT_CHANGED_SINCE:-}" ]]; then
  since=$INTURN_REPORT_CHANGED_SINCE
  if ! git rev-parse --verify --quiet "$since^{commit}" > /dev/null; then
    echo "changed (INTURN_REPORT_CHANGED_SINCE=$since is no commit here)"
    exit 0
  fi
  if git diff --quiet "$since" HEAD -- "${paths[@]}"; then
    echo "unchanged since $since"
    exit 1
  fi
  echo "changed since $since"
  exit 0
fi

now=$(fingerprint)
if [[ -f "$record" && "$(cat "$record")" == "$now" ]]; then
  echo "unchanged since make test-compat passed ($now)"
  exit 1
fi
echo "changed: $now, test-compat passed on $(cat "$record" 2> /dev/null || echo nothing recorded)"
exit 0
