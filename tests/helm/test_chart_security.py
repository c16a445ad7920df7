"""Secrets stay in Secrets; every container is non-root on a read-only root, with probes and resources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm.chart import CHART, CI_VALUES, Helm, Manifest, containers, of_kind, pod_spec, service_workloads

pytestmark = [pytest.mark.helm, pytest.mark.timeout(1800)]

SCENARIOS = [pytest.param((), id="default"), *(pytest.param((f,), id=f.stem) for f in CI_VALUES)]

#: One recognisable value per secret key the chart knows, so that a leak anywhere is found by a plain search.
KNOWN_SECRETS = {
    "postgres-password": "pg-pass-7f3a91",
    "whatsapp-access-token": "wa-token-2c8e44",
    "generic-token": "generic-token-9d1b07",
    "webhook-app-secrets": "app-secret-5e6f28",
    "webhook-verify-token": "verify-token-31aa0c",
    "webhook-generic-secret": "generic-secret-84c2d9",
}

#: The settings fields that are SecretStr (or hold credentials) and must only come through secretKeyRef.
SECRET_ENV = {
    "INTURN_POSTGRES_PASSWORD",
    "INTURN_WHATSAPP_ACCESS_TOKEN",
    "INTURN_GENERIC_TOKEN",
    "INTURN_WEBHOOK_APP_SECRETS",
    "INTURN_WEBHOOK_VERIFY_TOKEN",
    "INTURN_WEBHOOK_GENERIC_SECRET",
    "INTURN_KAFKA_CLIENT_CONFIG",
}


def render_with_known_secrets(helm: Helm) -> list[Manifest]:
    """Everything on, with the chart creating its Secret from KNOWN_SECRETS."""
    return helm.render(
        {"secrets": {"create": True, "values": KNOWN_SECRETS}},
        files=(CHART / "ci" / "full-values.yaml",),
    )


def test_secret_values_appear_in_no_configmap_and_nowhere_but_the_secret(helm: Helm) -> None:
    manifests = render_with_known_secrets(helm)
    secrets = of_kind(manifests, "Secret")
    assert len(secrets) == 1
    assert set(secrets[0]["stringData"].values()) >= set(KNOWN_SECRETS.values())
    for manifest in manifests:
        if manifest["kind"] == "Secret":
            continue
        text = yaml.safe_dump(manifest)
        leaked = [value for value in KNOWN_SECRETS.values() if value in text]
        assert leaked == [], f"{manifest['kind']}/{manifest['metadata']['name']} holds {leaked}"
    configmaps = of_kind(manifests, "ConfigMap")
    assert len(configmaps) >= 3
    for configmap in configmaps:
        assert not SECRET_ENV & set(configmap["data"]), configmap["metadata"]["name"]


@pytest.mark.parametrize("files", SCENARIOS)
def test_secret_settings_reach_containers_only_through_secret_key_refs(helm: Helm, files: tuple[Path, ...]) -> None:
    seen = set()
    for manifest in helm.render(files=files):
        for container in containers(manifest):
            for env in container.get("env", []):
                if env["name"] in SECRET_ENV:
                    seen.add(env["name"])
                    assert "value" not in env, f"{env['name']} has a literal value in {manifest['metadata']['name']}"
                    assert set(env["valueFrom"]) == {"secretKeyRef"}, env
    assert seen, "no container got any secret: the wiring is gone"


def test_the_worker_reads_its_secrets_from_the_named_existing_secrets(helm: Helm) -> None:
    manifests = helm.render(files=(CHART / "ci" / "full-values.yaml",))
    worker = next(m for m in service_workloads(manifests) if m["metadata"]["name"].endswith("-worker"))
    refs = {
        env["name"]: env["valueFrom"]["secretKeyRef"]
        for env in worker["spec"]["template"]["spec"]["containers"][0]["env"]
        if "secretKeyRef" in env.get("valueFrom", {})
    }
    assert refs["INTURN_GENERIC_TOKEN"] == {"name": "generic-platform", "key": "token", "optional": False}
    assert refs["INTURN_KAFKA_CLIENT_CONFIG"] == {"name": "kafka-sasl", "key": "client-config.json"}
    assert refs["INTURN_WHATSAPP_ACCESS_TOKEN"]["name"] == "rel-inturn-secrets"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"worker": {"config": {"whatsapp_access_token": "x"}}}, "whatsapp_access_token"),
        ({"config": {"kafka_client_config": '{"sasl.password": "x"}'}}, "kafka_client_config"),
        ({"webhook": {"config": {"webhook_app_secrets": "x"}}}, "webhook_app_secrets"),
        ({"report": {"config": {"postgres_password": "x"}}}, "postgres_password"),
    ],
)
def test_a_secret_put_in_plain_config_is_refused(helm: Helm, values: dict[str, Any], message: str) -> None:
    result = helm.template_text(values)
    assert result.returncode != 0
    assert message in result.stderr


def _security_problems(where: str, pod: dict[str, Any], container: dict[str, Any]) -> list[str]:
    sc = container.get("securityContext", {})
    pod_sc = pod.get("securityContext", {})
    problems = []
    if not (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")):
        problems.append(f"{where}: may run as root")
    if sc.get("runAsUser", pod_sc.get("runAsUser")) in (None, 0):
        problems.append(f"{where}: no non-zero runAsUser")
    if sc.get("readOnlyRootFilesystem") is not True:
        problems.append(f"{where}: root filesystem writable")
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{where}: privilege escalation allowed")
    if "ALL" not in sc.get("capabilities", {}).get("drop", []):
        problems.append(f"{where}: capabilities not dropped")
    if not any(m["mountPath"] == "/tmp" for m in container.get("volumeMounts", [])):  # noqa: S108 - a path we check
        problems.append(f"{where}: no writable /tmp")  # the root filesystem is read-only
    return problems


@pytest.mark.parametrize("files", SCENARIOS)
def test_every_container_runs_non_root_on_a_read_only_root_with_resources(helm: Helm, files: tuple[Path, ...]) -> None:
    problems = []
    workloads = 0
    for manifest in helm.render(files=files):
        pod = pod_spec(manifest)
        if pod is None:
            continue
        workloads += 1
        for container in containers(manifest):
            where = f"{manifest['kind']}/{manifest['metadata']['name']}/{container['name']}"
            problems += _security_problems(where, pod, container)
            resources = container.get("resources", {})
            if not {"cpu", "memory"} <= set(resources.get("requests", {})):
                problems.append(f"{where}: no cpu/memory requests")
            if "memory" not in resources.get("limits", {}):
                problems.append(f"{where}: no memory limit")
    assert workloads >= 2
    assert problems == []


def test_the_spark_pod_templates_are_non_root_too(helm: Helm) -> None:
    manifests = helm.render(files=(CHART / "ci" / "spark-cluster-values.yaml",))
    pods = next(m for m in of_kind(manifests, "ConfigMap") if m["metadata"]["name"].endswith("-report-pods"))
    assert set(pods["data"]) == {"executor.yaml", "driver.yaml"}
    for key, text in pods["data"].items():
        template = yaml.safe_load(text)
        assert _security_problems(key, template["spec"], template["spec"]["containers"][0]) == []


def test_only_the_driver_mounts_the_report_output(helm: Helm) -> None:
    # The driver writes every table (docs/reports.md), so the claim needs no ReadWriteMany for executors.
    manifests = helm.render(files=(CHART / "ci" / "spark-cluster-values.yaml",))
    pods = next(m for m in of_kind(manifests, "ConfigMap") if m["metadata"]["name"].endswith("-report-pods"))
    mounts = {
        key: {m["name"] for m in yaml.safe_load(text)["spec"]["containers"][0]["volumeMounts"]}
        for key, text in pods["data"].items()
    }
    assert mounts == {"executor.yaml": {"tmp"}, "driver.yaml": {"tmp", "output"}}


@pytest.mark.parametrize("files", SCENARIOS)
def test_every_service_container_has_startup_liveness_and_readiness_probes(helm: Helm, files: tuple[Path, ...]) -> None:
    deployments = service_workloads(helm.render(files=files))
    assert deployments
    for deployment in deployments:
        # The chart's own container (sidecars from `sidecars` are the operator's).
        for container in deployment["spec"]["template"]["spec"]["containers"][:1]:
            ports = {p["name"] for p in container["ports"]}
            paths = {}
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                http = container[probe]["httpGet"]
                assert http["port"] in ports, f"{deployment['metadata']['name']} {probe} port {http['port']}"
                paths[probe] = http["path"]
            assert paths == {"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/readyz"}


@pytest.mark.parametrize("files", SCENARIOS)
def test_batch_pods_have_a_deadline_instead_of_probes(helm: Helm, files: tuple[Path, ...]) -> None:
    # A run-to-completion pod serves no HTTP: a deadline, not a probe, is what stops a hung one.
    for manifest in helm.render(files=files):
        if manifest["kind"] == "Job":
            assert manifest["spec"]["activeDeadlineSeconds"] > 0
        elif manifest["kind"] == "CronJob":
            assert manifest["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] > 0
        elif manifest["kind"] == "Pod":
            assert manifest["spec"]["activeDeadlineSeconds"] > 0
