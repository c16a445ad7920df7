"""The rendered objects point at each other correctly: selectors, ports, names, hooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helm.chart import CI_VALUES, Helm, Manifest, containers, of_kind, pod_spec, service_workloads

pytestmark = [pytest.mark.helm, pytest.mark.timeout(1800)]

SCENARIOS = [pytest.param((), id="default"), *(pytest.param((f,), id=f.stem) for f in CI_VALUES)]


def pod_labels(manifest: Manifest) -> dict[str, str]:
    """Labels of the pods a workload creates."""
    if manifest["kind"] == "CronJob":
        labels: dict[str, str] = manifest["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    else:
        labels = manifest["spec"]["template"]["metadata"]["labels"]
    return labels


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """Whether a matchLabels selector selects pods with ``labels``."""
    return all(labels.get(k) == v for k, v in selector.items())


def names(manifests: list[Manifest], kind: str) -> set[str]:
    """Names of the rendered objects of ``kind``."""
    return {m["metadata"]["name"] for m in of_kind(manifests, kind)}


def the_selected(deployments: list[Manifest], selector: dict[str, Any]) -> Manifest:
    """The one Deployment ``selector`` selects (fails otherwise)."""
    found = [d for d in deployments if selects(selector, pod_labels(d))]
    assert len(found) == 1, f"{selector} selects {[d['metadata']['name'] for d in found]}"
    return found[0]


@pytest.mark.parametrize("files", SCENARIOS)
def test_services_pdbs_and_autoscalers_reach_exactly_one_deployment(helm: Helm, files: tuple[Path, ...]) -> None:
    manifests = helm.render(files=files)
    deployments = service_workloads(manifests)
    for deployment in deployments:
        assert selects(deployment["spec"]["selector"]["matchLabels"], pod_labels(deployment))
    for service in of_kind(manifests, "Service"):
        target = the_selected(deployments, service["spec"]["selector"])
        ports = {p["name"] for c in containers(target) for p in c.get("ports", [])}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports
    for pdb in of_kind(manifests, "PodDisruptionBudget"):
        the_selected(deployments, pdb["spec"]["selector"]["matchLabels"])
    for scaler in of_kind(manifests, "HorizontalPodAutoscaler") + of_kind(manifests, "ScaledObject"):
        target = scaler["spec"]["scaleTargetRef"]
        assert target["name"] in names(manifests, target.get("kind", "Deployment"))


@pytest.mark.parametrize("files", SCENARIOS)
def test_monitors_ingresses_and_policies_reach_what_exists(helm: Helm, files: tuple[Path, ...]) -> None:
    manifests = helm.render(files=files)
    services = of_kind(manifests, "Service")
    for monitor in of_kind(manifests, "ServiceMonitor"):
        selector = monitor["spec"]["selector"]
        absent = {e["key"] for e in selector.get("matchExpressions", []) if e["operator"] == "DoesNotExist"}
        selected = [
            s
            for s in services
            if selects(selector["matchLabels"], s["metadata"]["labels"]) and not absent & set(s["metadata"]["labels"])
        ]
        assert len(selected) == 1
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {p["name"] for p in selected[0]["spec"]["ports"]}
    by_name = {s["metadata"]["name"]: s for s in services}
    for ingress in of_kind(manifests, "Ingress"):
        for rule in ingress["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                backend = path["backend"]["service"]
                assert backend["port"]["name"] in {p["name"] for p in by_name[backend["name"]]["spec"]["ports"]}
    workloads = service_workloads(manifests) + of_kind(manifests, "CronJob") + of_kind(manifests, "Job")
    executor_labels = spark_executor_labels(manifests)
    for policy in of_kind(manifests, "NetworkPolicy"):
        selector = policy["spec"]["podSelector"]["matchLabels"]
        pods = [pod_labels(w) for w in workloads] + ([executor_labels] if executor_labels else [])
        assert [labels for labels in pods if selects(selector, labels)], policy["metadata"]["name"]


def spark_executor_labels(manifests: list[Manifest]) -> dict[str, str]:
    """The labels spark-submit puts on executor pods (its spark.kubernetes.executor.label.* confs), if any."""
    labels = {}
    for cronjob in of_kind(manifests, "CronJob"):
        for container in containers(cronjob):
            for part in " ".join(container.get("args", [])).split("--conf "):
                key, _, value = part.split()[0].partition("=") if part.split() else ("", "", "")
                if key.startswith("spark.kubernetes.executor.label."):
                    labels[key.removeprefix("spark.kubernetes.executor.label.")] = value
    return labels


@pytest.mark.parametrize("files", SCENARIOS)
def test_configmaps_and_service_accounts_the_pods_name_are_rendered(helm: Helm, files: tuple[Path, ...]) -> None:
    manifests = helm.render(files=files)
    configmaps = names(manifests, "ConfigMap")
    accounts = names(manifests, "ServiceAccount") | {"default"}
    for manifest in manifests:
        spec = pod_spec(manifest)
        if spec is None:
            continue
        assert spec.get("serviceAccountName", "default") in accounts
        for container in containers(manifest):
            for source in container.get("envFrom", []):
                if source.get("configMapRef", {}).get("optional"):
                    continue  # an operator's optional extra (extraEnvFrom), not the chart's
                assert source["configMapRef"]["name"] in configmaps
        for volume in spec.get("volumes", []):
            if "configMap" in volume:
                assert volume["configMap"]["name"] in configmaps


def test_the_topics_hook_runs_before_the_release_and_the_test_pod_is_a_test_hook(helm: Helm) -> None:
    manifests = helm.render()
    (job,) = of_kind(manifests, "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    # A pre-install hook runs before the release's ServiceAccount and ConfigMaps exist: it must need neither.
    spec = job["spec"]["template"]["spec"]
    assert "serviceAccountName" not in spec
    assert all("envFrom" not in c for c in spec["containers"])
    (pod,) = of_kind(manifests, "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
