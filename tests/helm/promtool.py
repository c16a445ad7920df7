"""The project's pinned promtool (Prometheus's rule checker), built by ``scripts/install-promtool.sh``.

Built like helm: ``go install`` of the Prometheus Go module at a pinned version into the project's cache dir; the
first build takes a few minutes, later calls only print the binary's path.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.helm.chart import Manifest, ToolMissing, install_tool, of_kind


class PromtoolMissing(ToolMissing):
    """promtool could not be built; the message says what to run."""


def install_promtool() -> Path:
    """The pinned promtool binary (``install_tool``)."""
    return install_tool("promtool", PromtoolMissing)


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
