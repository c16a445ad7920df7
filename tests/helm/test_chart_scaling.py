"""Never more workers than partitions; pods roll when their configuration changes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helm.chart import SERVICE_WORKLOADS, Helm, Manifest, named, of_kind

pytestmark = [pytest.mark.helm, pytest.mark.timeout(1800)]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"topics": {"partitions": 4}, "worker": {"replicas": 5}}, "worker.replicas (5) exceeds topics.partitions (4)"),
        (
            {"topics": {"partitions": 4}, "worker": {"replicas": 2, "hpa": {"enabled": True, "maxReplicas": 8}}},
            "worker.hpa.maxReplicas (8) exceeds topics.partitions (4)",
        ),
        (
            {"topics": {"partitions": 4}, "worker": {"replicas": 2, "keda": {"enabled": True, "maxReplicas": 6}}},
            "worker.keda.maxReplicas (6) exceeds topics.partitions (4)",
        ),
    ],
    ids=["replicas", "hpa", "keda"],
)
def test_more_workers_than_partitions_fails_rendering(helm: Helm, values: dict[str, Any], message: str) -> None:
    result = helm.template_text(values)
    assert result.returncode != 0
    assert message in result.stderr


def test_as_many_workers_as_partitions_renders_and_the_workers_learn_the_partition_count(helm: Helm) -> None:
    manifests = helm.render({"topics": {"partitions": 4}, "worker": {"replicas": 4}})
    assert named(manifests, "StatefulSet", "-worker")["spec"]["replicas"] == 4
    for configmap in of_kind(manifests, "ConfigMap"):
        if "INTURN_KAFKA_BOOTSTRAP" in configmap["data"]:
            assert configmap["data"]["INTURN_TOPIC_PARTITIONS"] == "4"
    hook = named(manifests, "Job", "-topics")
    env = {e["name"]: e.get("value") for e in hook["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["INTURN_TOPIC_PARTITIONS"] == "4"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"config": {"topic_partitions": 48}}, "config.topic_partitions is set by the chart from topics.partitions"),
        ({"worker": {"config": {"worker_http_port": 9000}}}, "worker.config.worker_http_port is set by the chart"),
        ({"worker": {"config": {"worker_instance_id": "w"}}}, "worker.config.worker_instance_id is set by the chart"),
    ],
)
def test_a_setting_the_chart_derives_cannot_be_set_beside_it(helm: Helm, values: dict[str, Any], message: str) -> None:
    # Otherwise the workers could read another partition count than the one the replica check used.
    result = helm.template_text(values)
    assert result.returncode != 0
    assert message in result.stderr


def test_hpa_and_keda_on_the_worker_together_are_refused(helm: Helm) -> None:
    result = helm.template_text({"worker": {"hpa": {"enabled": True}, "keda": {"enabled": True, "maxReplicas": 6}}})
    assert result.returncode != 0
    assert "both enabled" in result.stderr


def test_an_autoscaled_worker_leaves_replicas_to_the_autoscaler(helm: Helm) -> None:
    manifests = helm.render({"worker": {"keda": {"enabled": True, "maxReplicas": 12}}})
    assert "replicas" not in named(manifests, "StatefulSet", "-worker")["spec"]
    scaled = of_kind(manifests, "ScaledObject")[0]
    assert scaled["spec"]["maxReplicaCount"] == 12
    assert scaled["spec"]["triggers"][0]["metadata"]["allowIdleConsumers"] == "false"


def checksums(manifests: list[Manifest]) -> dict[str, dict[str, str]]:
    """Pod-template checksum annotations by workload name."""
    found = {}
    for manifest in manifests:
        if manifest["kind"] in SERVICE_WORKLOADS:
            template = manifest["spec"]["template"]
        elif manifest["kind"] == "CronJob":
            template = manifest["spec"]["jobTemplate"]["spec"]["template"]
        else:
            continue
        annotations = template["metadata"].get("annotations", {})
        found[manifest["metadata"]["name"]] = {k: v for k, v in annotations.items() if k.startswith("checksum/")}
    return found


def test_a_worker_setting_change_rolls_the_worker_and_nothing_else(helm: Helm) -> None:
    before = checksums(helm.render())
    assert before == checksums(helm.render()), "the checksum must be deterministic"
    after = checksums(helm.render({"worker": {"config": {"worker_ack_timeout_ms": 8000}}}))
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"rel-inturn-worker"}
    assert all("checksum/config" in annotations for annotations in before.values())


def test_a_shared_setting_change_rolls_every_workload(helm: Helm) -> None:
    before = checksums(helm.render())
    after = checksums(helm.render({"config": {"log_level": "DEBUG"}}))
    assert len(before) == 4
    assert all(before[name]["checksum/config"] != after[name]["checksum/config"] for name in before)


def test_a_chart_created_secret_change_rolls_the_pods(helm: Helm) -> None:
    values: dict[str, Any] = {"secrets": {"create": True, "values": {"whatsapp-access-token": "one"}}}
    before = checksums(helm.render(values))["rel-inturn-worker"]
    values["secrets"]["values"]["whatsapp-access-token"] = "two"
    after = checksums(helm.render(values))["rel-inturn-worker"]
    assert before["checksum/config"] == after["checksum/config"]
    assert before["checksum/secret"] != after["checksum/secret"]


def test_the_worker_is_a_statefulset_whose_pods_are_static_members_named_after_themselves(helm: Helm) -> None:
    worker = named(helm.render(), "StatefulSet", "-worker")
    spec = worker["spec"]
    assert (spec["podManagementPolicy"], spec["updateStrategy"]["type"]) == ("Parallel", "RollingUpdate")
    env = {e["name"]: e for e in worker["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["INTURN_WORKER_INSTANCE_ID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    scaled = named(helm.render({"worker": {"keda": {"enabled": True}}}), "ScaledObject", "-worker")
    assert scaled["spec"]["scaleTargetRef"]["kind"] == "StatefulSet"


def test_without_static_membership_the_worker_is_a_deployment_with_dynamic_members(helm: Helm) -> None:
    manifests = helm.render({"worker": {"staticMembership": False, "hpa": {"enabled": True}}})
    assert of_kind(manifests, "StatefulSet") == []
    worker = named(manifests, "Deployment", "-worker")
    env = worker["spec"]["template"]["spec"]["containers"][0].get("env", [])
    assert "INTURN_WORKER_INSTANCE_ID" not in {e["name"] for e in env}
    assert named(manifests, "HorizontalPodAutoscaler", "-worker")["spec"]["scaleTargetRef"]["kind"] == "Deployment"
