"""The Dockerfile lints clean and agrees with the chart: user, ports, install paths, report entry point."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

import inturn_reports
from inturn.settings.bridge import BridgeSettings
from inturn.settings.webhook import WebhookSettings
from inturn.settings.worker import WorkerSettings
from tests.helm.chart import CHART, REPO, Helm, chart_tools

pytestmark = [pytest.mark.helm, pytest.mark.timeout(900)]

DOCKERFILE = REPO / "Dockerfile"
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())


def dockerfile_lines(instruction: str) -> list[str]:
    """The arguments of every ``instruction`` line (e.g. USER, EXPOSE) of the Dockerfile."""
    pattern = re.compile(rf"^{instruction}\s+(.*)$")
    return [m.group(1) for line in DOCKERFILE.read_text().splitlines() if (m := pattern.match(line))]


def test_the_dockerfile_passes_hadolint() -> None:
    done = subprocess.run(
        [str(chart_tools() / "hadolint"), "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_user_is_the_one_the_chart_runs_as() -> None:
    assert dockerfile_lines("USER") == ["10001:10001"]
    for context in (VALUES["podSecurityContext"], VALUES["securityContext"]):
        assert (context["runAsUser"], context["runAsGroup"]) == (10001, 10001)


def test_the_exposed_ports_are_the_chart_ports_and_the_settings_defaults() -> None:
    (exposed,) = dockerfile_lines("EXPOSE")
    ports = {int(p) for p in exposed.split()}
    assert ports == {VALUES["worker"]["port"], VALUES["webhook"]["port"], VALUES["bridge"]["port"]}
    assert VALUES["worker"]["port"] == WorkerSettings.model_fields["worker_http_port"].default
    assert VALUES["webhook"]["port"] == WebhookSettings.model_fields["webhook_port"].default
    assert VALUES["bridge"]["port"] == BridgeSettings.model_fields["bridge_http_port"].default


def test_the_report_application_is_the_installed_entry_module_of_the_image() -> None:
    application = Path(VALUES["report"]["application"])
    (base,) = [arg for arg in dockerfile_lines("ARG") if arg.startswith("PYTHON_IMAGE=")]
    minor = re.match(r"PYTHON_IMAGE=python:(\d+\.\d+)\.\d+-slim-bookworm$", base)  # pinned to a patch release
    assert minor is not None, base
    venv = "/opt/inturn/venv"
    assert f"VENV={venv}" in DOCKERFILE.read_text()
    assert application == Path(venv, "lib", f"python{minor.group(1)}", "site-packages", "inturn_reports", "__main__.py")
    assert (Path(inturn_reports.__file__).parent / application.name).is_file()


def test_the_report_jars_are_built_into_the_folder_the_chart_puts_on_the_class_path(helm: Helm) -> None:
    # The Kafka source is called on the driver and runs on the executors: both JVMs find it on their class path,
    # from the image itself.
    text = DOCKERFILE.read_text()
    assert "-m inturn_reports.jars kafka $REPORT_CONNECTORS" in text
    assert "cp -v {} /opt/inturn/jars/" in text
    (cronjob,) = [m for m in helm.render() if m["kind"] == "CronJob" and m["metadata"]["name"].endswith("-report")]
    command = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"][0]
    for jvm in ("driver", "executor"):
        assert f"--conf 'spark.{jvm}.extraClassPath=/opt/inturn/jars/*'" in command


def _engine() -> str | None:
    """``docker`` or ``buildah`` when one answers here (an engine, not only its client), else None."""
    for tool, probe in (("docker", ["docker", "info"]), ("buildah", ["buildah", "info"])):
        try:
            if subprocess.run(probe, capture_output=True, timeout=20, check=False).returncode == 0:
                return tool
        except (FileNotFoundError, subprocess.TimeoutExpired):
            continue
    return None


@pytest.mark.timeout(3600)
def test_both_images_build_and_only_the_report_image_carries_spark() -> None:
    engine = _engine()
    if engine is None:
        pytest.skip("no container engine answers here (docker info, buildah info): hadolint alone checks it")
    built = {}
    for name, extra in (("inturn-ci", []), ("inturn-report-ci", ["--build-arg", "REPORT=1"])):
        done = subprocess.run(
            [engine, "build", *extra, "-t", f"{name}:test", str(REPO)], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        built[name] = f"{name}:test"
    for name, has_spark in (("inturn-ci", False), ("inturn-report-ci", True)):
        python = ["--entrypoint", "/opt/inturn/venv/bin/python", built[name], "-c", "import pyspark"]
        runner = [engine, "run", "--rm", *python]
        assert (subprocess.run(runner, capture_output=True, check=False).returncode == 0) is has_spark, name
