"""The chart lints strictly and every manifest it renders is valid Kubernetes, for every values scenario."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest

from tests.helm.chart import CHART, CI_VALUES, Helm, Manifest, of_kind

# Building helm on a fresh machine may take minutes inside the first test's fixture set-up.
pytestmark = [pytest.mark.helm, pytest.mark.timeout(1800)]

#: The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and a recent one.
KUBERNETES_VERSIONS = ("1.29.0", "1.35.0")

#: Kinds from CRDs (Prometheus Operator, KEDA): kubernetes-validate ships no schema for them, so they are
#: skipped on purpose, by name; any other kind without a schema fails the test.
CRD_KINDS = frozenset({"ServiceMonitor", "PrometheusRule", "ScaledObject"})

SCENARIOS = [pytest.param((), id="default"), *(pytest.param((f,), id=f.stem) for f in CI_VALUES)]


def validation_errors(manifests: list[Manifest], version: str) -> list[str]:
    """What kubernetes-validate (strict: unknown fields are errors) finds wrong, one line per problem."""
    problems = []
    for manifest in manifests:
        if manifest["kind"] in CRD_KINDS:
            continue
        where = f"{manifest['kind']}/{manifest['metadata']['name']}"
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{where} at {'.'.join(map(str, exc.path))}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError:
            problems.append(f"{where}: no schema for {manifest['apiVersion']} {manifest['kind']} in {version}")
    return problems


def test_there_is_at_least_one_ci_scenario() -> None:
    assert CI_VALUES, f"no ci/*-values.yaml under {CHART}"


@pytest.mark.parametrize("files", SCENARIOS)
def test_the_chart_lints_strictly(helm: Helm, files: tuple[Path, ...]) -> None:
    args = ["lint", "--strict", str(CHART)]
    for f in files:
        args += ["-f", str(f)]
    result = helm.run(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("files", SCENARIOS)
def test_every_rendered_manifest_is_valid_kubernetes(helm: Helm, files: tuple[Path, ...], version: str) -> None:
    manifests = helm.render(files=files)
    assert manifests
    assert validation_errors(manifests, version) == []


def test_the_validation_catches_a_broken_manifest(default_manifests: list[Manifest]) -> None:
    # The check above must be able to fail: an unknown field and a wrong type are both reported.
    deployment = dict(of_kind(default_manifests, "Deployment")[0])
    deployment["spec"] = {**deployment["spec"], "replicas": "three", "surplus": True}
    assert len(validation_errors([deployment], KUBERNETES_VERSIONS[0])) == 1
    crd_free = [m for m in default_manifests if m["kind"] not in CRD_KINDS]
    unknown = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    assert validation_errors([*crd_free, unknown], KUBERNETES_VERSIONS[0]) == [
        "Gadget/g: no schema for example.com/v1 Gadget in 1.29.0"
    ]


def test_the_full_scenario_renders_every_kind_the_chart_offers(helm: Helm) -> None:
    manifests = helm.render(files=(CHART / "ci" / "full-values.yaml",))
    kinds = {m["kind"] for m in manifests}
    assert kinds >= {
        "ConfigMap", "CronJob", "Deployment", "HorizontalPodAutoscaler", "Ingress", "Job", "NetworkPolicy", "Pod",
        "PodDisruptionBudget", "PrometheusRule", "Role", "RoleBinding", "ScaledObject", "Secret", "Service",
        "ServiceAccount", "ServiceMonitor", "StatefulSet",
    }  # fmt: skip


def test_resource_names_fit_in_63_characters(helm: Helm) -> None:
    release = "a-release-name-of-53-characters-the-most-helm-allows1"
    assert len(release) == 53
    for manifest in helm.render(release=release, files=(CHART / "ci" / "full-values.yaml",)):
        limit = 52 if manifest["kind"] == "CronJob" else 63
        assert len(manifest["metadata"]["name"]) <= limit, manifest["metadata"]["name"]


def test_the_report_runs_the_report_image_and_the_services_the_service_image(helm: Helm) -> None:
    # The service image carries no Spark (the Dockerfile's REPORT=1 build does), so the report's pods and the
    # executors Spark creates must name the report image.
    values = {"image": {"repository": "registry.example/inturn", "tag": "1.2.3"}}
    manifests = helm.render(values)
    cron = of_kind(manifests, "CronJob")[0]
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    driver = next(c for c in pod["containers"] if c["name"] != "sidecar")
    assert driver["image"] == "registry.example/inturn-report:1.2.3"
    assert "spark.kubernetes.container.image='registry.example/inturn-report:1.2.3'" in " ".join(
        driver.get("command", []) + driver.get("args", [])
    )
    for kind in ("StatefulSet", "Deployment"):
        for workload in of_kind(manifests, kind):
            for container in workload["spec"]["template"]["spec"]["containers"]:
                assert container["image"] == "registry.example/inturn:1.2.3", workload["metadata"]["name"]
    pinned = helm.render(
        {**values, "report": {"image": {"repository": "other/report", "digest": "sha256:" + "a" * 64}}}
    )
    pinned_pod = of_kind(pinned, "CronJob")[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pinned_pod["containers"][0]["image"] == "other/report@sha256:" + "a" * 64
