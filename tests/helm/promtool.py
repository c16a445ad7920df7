"""The project's pinned promtool (Prometheus's rule checker), built by ``scripts/install-promtool.sh``.

Built like helm: ``go install`` of the Prometheus Go module at a pinned version into the project's cache dir; the
first build takes a few minutes, later calls only print the binary's path.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.helm.chart import REPO, Manifest, of_kind

INSTALL_PROMTOOL = REPO / "scripts" / "install-promtool.sh"


class PromtoolMissing(RuntimeError):
    """promtool could not be built; the message says what to run."""


def install_promtool() -> Path:
    """The pinned promtool binary, built by scripts/install-promtool.sh if it is not in the cache yet."""
    try:
        out = subprocess.run([str(INSTALL_PROMTOOL)], check=True, capture_output=True, text=True, timeout=1800)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        raise PromtoolMissing(
            f"promtool is missing and could not be built; run scripts/install-promtool.sh (needs Go and the Go "
            f"module proxy) and look at its output:\n{detail}"
        ) from exc
    promtool = Path(out.stdout.strip().splitlines()[-1])
    if not promtool.is_file():
        raise PromtoolMissing(f"scripts/install-promtool.sh printed {promtool}, which is not a file; run it by hand")
    return promtool


def rules_file(manifests: list[Manifest]) -> dict[str, Any]:
    """The rendered PrometheusRule's groups as a Prometheus rules file (what the Prometheus Operator loads)."""
    (rule,) = of_kind(manifests, "PrometheusRule")
    return {"groups": rule["spec"]["groups"]}


def write_rules(manifests: list[Manifest], path: Path) -> Path:
    """Writes ``rules_file(manifests)`` to ``path``."""
    path.write_text(yaml.safe_dump(rules_file(manifests), sort_keys=False))
    return path


def run(promtool: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """promtool with ``args``; the result whatever the exit code (callers assert on it)."""
    return subprocess.run([str(promtool), *args], capture_output=True, text=True, timeout=300, check=False, cwd=cwd)
