"""Safe as installed (issue 38) and operable like the common charts (issue 43): ports, NetworkPolicies, the checked
`config` maps, the push rule, the report's output and namespace, extra volumes/env/containers, drain vs grace, the
generated parameters table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from inturn_devtools import chart_readme, chart_schema
from tests.helm.chart import CHART, CI_VALUES, Helm, Manifest, containers, named, of_kind, pod_spec
from tests.helm.test_chart_render import KUBERNETES_VERSIONS, validation_errors

pytestmark = [pytest.mark.helm, pytest.mark.timeout(1800)]

ISOLATED = CHART / "ci" / "isolated-values.yaml"
PUSH = {
    "mode": "push",
    "config": {
        "bridge_oidc_audience": "https://push.example.com/push",
        "bridge_oidc_email": "p@x.iam.gserviceaccount.com",
    },
}


def ports(container: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container.get("ports", [])}


def main_container(manifest: Manifest) -> dict[str, Any]:
    spec = pod_spec(manifest)
    assert spec is not None
    first: dict[str, Any] = spec["containers"][0]
    return first


def configmap(manifests: list[Manifest], component: str) -> dict[str, str]:
    data: dict[str, str] = named(manifests, "ConfigMap", f"-{component}")["data"]
    return data


# --- the checked `config` maps -------------------------------------------------------------------------------


def test_the_committed_schema_is_the_generated_one() -> None:
    assert chart_schema.main(["--check"]) == 0, "run: python -m inturn_devtools.chart_schema"


def test_the_schema_drift_check_can_fail() -> None:
    committed = json.loads(chart_schema.SCHEMA.read_text())
    committed["properties"]["worker"]["properties"]["config"]["properties"].pop("worker_ack_timeout_ms")
    assert chart_schema.render(committed) != chart_schema.render(chart_schema.generate(committed))


def test_every_settings_field_but_the_secrets_is_a_config_property() -> None:
    from inturn.settings.worker import WorkerSettings

    props = chart_schema.config_properties(("worker", "config"))["properties"]
    assert "worker_ack_timeout_ms" in props
    assert "postgres_password" not in props
    assert "kafka_client_config" not in props
    assert set(props) - {"worker_instance_id"} <= set(WorkerSettings.model_fields)


def test_the_known_keys_file_is_the_generated_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    known = json.loads(chart_schema.SETTINGS.read_text())
    assert "worker_ack_timeout_ms" in known["worker.config"]
    assert "postgres_password" not in known["worker.config"]
    known["worker.config"].remove("worker_ack_timeout_ms")
    stale = tmp_path / "settings.json"
    stale.write_text(json.dumps(known))
    monkeypatch.setattr(chart_schema, "SETTINGS", stale)
    assert chart_schema.main(["--check"]) == 1


MISSPELT = [
    ("worker", "worker_ack_timout_ms", "worker_ack_timeout_ms"),
    ("webhook", "webhok_public_base_url", "webhook_public_base_url"),
    ("report", "reprot_top_n", "report_top_n"),
]


@pytest.mark.parametrize("command", ["template", "lint"])
@pytest.mark.parametrize(("component", "wrong", "right"), MISSPELT, ids=[m[0] for m in MISSPELT])
def test_a_misspelt_config_key_fails_naming_the_right_one(
    helm: Helm, command: str, component: str, wrong: str, right: str, tmp_path: Path
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({component: {"config": {wrong: 8}}}))
    args = ["template", "rel", str(CHART)] if command == "template" else ["lint", str(CHART)]
    result = helm.run(*args, "-f", str(values))
    assert result.returncode != 0
    message = f"{component}.config.{wrong} is not a setting of the {component} (did you mean {right}?)"
    assert message in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"worker": {"config": {"zzz_qqq": 1}}}, "worker.config.zzz_qqq is not a setting of the worker;"),
        (
            {"webhook": {"config": {"worker_ack_timeout_ms": 8000}}},
            "webhook.config.worker_ack_timeout_ms is not a setting of the webhook;",
        ),
        (
            {"config": {"loglevel": "INFO"}},
            "config.loglevel is not a setting of every component (did you mean log_level?)",
        ),
    ],
    ids=["nothing-close", "another-components-key", "shared"],
)
def test_an_unknown_config_key_fails_suggesting_only_a_close_one(
    helm: Helm, values: dict[str, Any], message: str
) -> None:
    result = helm.template_text(values)
    assert result.returncode != 0
    assert message in result.stderr
    if message.endswith(";"):
        assert "did you mean" not in result.stderr


def _a_value(prop: dict[str, Any]) -> Any:
    """A value of the type a config property takes (its first enum value, if any)."""
    if "enum" in prop:
        return next(v for v in prop["enum"] if v is not None)
    kinds = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
    samples = {"integer": 1, "number": 1, "boolean": False, "string": "x", "array": [], "object": {}}
    return next(samples[k] for k in ("integer", "number", "boolean", "string", "array", "object") if k in kinds)


@pytest.mark.parametrize("path", list(chart_schema.CONFIG_MAPS), ids=".".join)
def test_every_known_config_key_renders(helm: Helm, path: tuple[str, ...]) -> None:
    known = json.loads(chart_schema.SETTINGS.read_text())[".".join(path)]
    props = chart_schema.config_properties(path)["properties"]
    managed = {k for fields in chart_schema.CHART_MANAGED.values() for k in fields}
    config = {key: _a_value(props[key]) for key in known if key not in managed}
    assert len(config) >= 5
    values: dict[str, Any] = {"config": config} if path == ("config",) else {path[0]: {"config": config}}
    result = helm.template_text(values)
    assert result.returncode == 0, result.stderr
    assert [key for key in config if f"INTURN_{key.upper()}:" not in result.stdout] == []


@pytest.mark.parametrize(
    "values",
    [
        {"worker": {"config": {"worker_ack_timeout_ms": "soon"}}},
        {"config": {"log_level": "LOUD"}},
    ],
    ids=["wrong-type", "not-in-the-enum"],
)
def test_the_config_schema_refuses_wrong_values(helm: Helm, values: dict[str, Any]) -> None:
    result = helm.template_text(values)
    assert result.returncode != 0
    assert "schema" in result.stderr


@pytest.mark.parametrize("files", [pytest.param((), id="default"), *(pytest.param((f,), id=f.stem) for f in CI_VALUES)])
def test_no_pod_gets_service_link_variables(helm: Helm, files: tuple[Path, ...]) -> None:
    # INTURN_WEBHOOK_PORT=tcp://... from a Service named like the webhook's would be read as a setting.
    pods: dict[str, dict[str, Any]] = {}
    for manifest in helm.render(files=files):
        spec = pod_spec(manifest)
        if spec is not None:
            pods[f"{manifest['kind']}/{manifest['metadata']['name']}"] = spec
        if manifest["kind"] == "ConfigMap" and manifest["metadata"]["name"].endswith("-report-pods"):
            for key, text in manifest["data"].items():
                pods[f"report-pods/{key}"] = yaml.safe_load(text)["spec"]
    assert len(pods) >= 2
    assert {where: spec.get("enableServiceLinks") for where, spec in pods.items()} == dict.fromkeys(pods, False)


# --- ports ---------------------------------------------------------------------------------------------------


def test_the_webhook_serves_callbacks_and_internals_on_separate_ports(default_manifests: list[Manifest]) -> None:
    webhook = named(default_manifests, "Deployment", "-webhook")
    container = main_container(webhook)
    assert ports(container) == {"http": 8080, "internal": 9090}
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["port"] == "internal"
    data = configmap(default_manifests, "webhook")
    assert (data["INTURN_WEBHOOK_PORT"], data["INTURN_WEBHOOK_INTERNAL_PORT"]) == ("8080", "9090")
    service = named(default_manifests, "Service", "-webhook")
    assert {(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {
        ("http", 80, "http"),
        ("internal", 9090, "internal"),
    }


def test_the_bridge_has_a_push_port_only_in_push_mode(helm: Helm, default_manifests: list[Manifest]) -> None:
    pull = main_container(named(default_manifests, "Deployment", "-bridge"))
    assert ports(pull) == {"internal": 9091}
    assert configmap(default_manifests, "bridge")["INTURN_BRIDGE_INTERNAL_PORT"] == "9091"
    pushed = helm.render({"bridge": PUSH})
    assert ports(main_container(named(pushed, "Deployment", "-bridge"))) == {"http": 8082, "internal": 9091}
    assert {p["name"] for p in named(pushed, "Service", "-bridge")["spec"]["ports"]} == {"http", "internal"}


def test_the_worker_port_is_internal_and_its_pods_have_dns_names(default_manifests: list[Manifest]) -> None:
    worker = named(default_manifests, "StatefulSet", "-worker")
    assert ports(main_container(worker)) == {"internal": 8081}
    headless = named(default_manifests, "Service", "-worker-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert worker["spec"]["serviceName"] == headless["metadata"]["name"]
    assert headless["spec"]["selector"] == worker["spec"]["selector"]["matchLabels"]


def test_the_ingresses_route_only_the_public_port_and_paths(helm: Helm) -> None:
    manifests = helm.render(
        {"webhook": {"ingress": {"enabled": True}}, "bridge": {**PUSH, "ingress": {"enabled": True}}}
    )
    ingresses = of_kind(manifests, "Ingress")
    assert len(ingresses) == 2
    paths = set()
    for ingress in ingresses:
        for rule in ingress["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                assert path["backend"]["service"]["port"] == {"name": "http"}
                paths.add(path["path"])
    assert paths == {"/webhooks", "/push"}


@pytest.mark.parametrize(
    "values",
    [
        {"webhook": {"ingress": {"hosts": [{"host": "h", "paths": [{"path": "/", "pathType": "Prefix"}]}]}}},
        {"webhook": {"ingress": {"hosts": [{"host": "h", "paths": [{"path": "/metrics", "pathType": "Exact"}]}]}}},
        {"bridge": {"ingress": {"hosts": [{"host": "h", "paths": [{"path": "/", "pathType": "Prefix"}]}]}}},
    ],
    ids=["webhook-root", "webhook-metrics", "bridge-root"],
)
def test_the_schema_refuses_ingress_paths_beyond_the_public_routes(helm: Helm, values: dict[str, Any]) -> None:
    result = helm.template_text(values)
    assert result.returncode != 0
    assert "schema" in result.stderr


def test_the_service_monitors_scrape_the_internal_port_and_skip_the_headless_service(helm: Helm) -> None:
    manifests = helm.render({"metrics": {"serviceMonitor": {"enabled": True}}})
    monitors = of_kind(manifests, "ServiceMonitor")
    assert len(monitors) == 3
    for monitor in monitors:
        assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["internal"]
        assert {"key": "inturn.dev/headless", "operator": "DoesNotExist"} in monitor["spec"]["selector"][
            "matchExpressions"
        ]
    assert named(manifests, "Service", "-worker-headless")["metadata"]["labels"]["inturn.dev/headless"] == "true"


def test_the_room_api_token_comes_from_an_optional_secret_key(default_manifests: list[Manifest]) -> None:
    env = {e["name"]: e for e in main_container(named(default_manifests, "StatefulSet", "-worker"))["env"]}
    ref = env["INTURN_WORKER_ROOM_API_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert (ref["key"], ref["optional"]) == ("worker-room-api-token", True)
    for kind, suffix in (("Deployment", "-webhook"), ("Deployment", "-bridge")):
        names = {e["name"] for e in main_container(named(default_manifests, kind, suffix)).get("env", [])}
        assert "INTURN_WORKER_ROOM_API_TOKEN" not in names


# --- push needs proof ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "missing"),
    [
        ({}, ["bridge_oidc_audience", "bridge_oidc_email"]),
        ({"bridge_oidc_audience": "https://push.example.com/push"}, ["bridge_oidc_email"]),
        ({"bridge_oidc_email": "p@x.iam.gserviceaccount.com"}, ["bridge_oidc_audience"]),
    ],
    ids=["neither", "audience-only", "email-only"],
)
def test_push_mode_without_audience_and_email_fails_to_render(
    helm: Helm, config: dict[str, str], missing: list[str], tmp_path: Path
) -> None:
    values = {"bridge": {"mode": "push", "config": {"bridge_project": "p", **config}}}
    result = helm.template_text(values)
    assert result.returncode != 0
    assert "schema" in result.stderr
    for name in missing:
        assert name in result.stderr
    # The chart's own check says the same (and names the opt-out) when the schema is skipped.
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump(values))
    unchecked = helm.run("template", "rel", str(CHART), "-f", str(file), "--skip-schema-validation")
    assert unchecked.returncode != 0
    assert "bridge_oidc_audience and bridge.config.bridge_oidc_email" in unchecked.stderr
    assert "bridge.push.allowUnauthenticated" in unchecked.stderr


def test_the_unauthenticated_opt_out_renders(helm: Helm) -> None:
    # NOTES' loud warning is checked where helm prints NOTES: the install on the API server (test_chart_apiserver).
    manifests = helm.render({"bridge": {"mode": "push", "push": {"allowUnauthenticated": True}}})
    assert configmap(manifests, "bridge")["INTURN_BRIDGE_PUSH_ALLOW_UNAUTHENTICATED"] == "true"


def test_authenticated_push_renders_with_the_opt_out_off(helm: Helm) -> None:
    data = configmap(helm.render({"bridge": PUSH}), "bridge")
    assert data["INTURN_BRIDGE_PUSH_ALLOW_UNAUTHENTICATED"] == "false"
    assert data["INTURN_BRIDGE_OIDC_EMAIL"] == "p@x.iam.gserviceaccount.com"


# --- NetworkPolicies -----------------------------------------------------------------------------------------


def policy(manifests: list[Manifest], suffix: str) -> dict[str, Any]:
    spec: dict[str, Any] = named(manifests, "NetworkPolicy", suffix)["spec"]
    return spec


def peers_by_port(spec: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for rule in spec["ingress"]:
        for port in rule["ports"]:
            found[str(port["port"])] = rule["from"]
    return found


NS = "kubernetes.io/metadata.name"


def test_by_default_callbacks_come_from_the_ingress_namespace_and_scrapes_from_monitoring(
    default_manifests: list[Manifest],
) -> None:
    webhook = peers_by_port(policy(default_manifests, "-webhook"))
    assert webhook["http"] == [{"namespaceSelector": {"matchLabels": {NS: "ingress-nginx"}}}]
    assert webhook["internal"][0] == {"namespaceSelector": {"matchLabels": {NS: "monitoring"}}}
    assert webhook["internal"][1]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "test"
    for suffix in ("-worker", "-bridge"):
        by_port = peers_by_port(policy(default_manifests, suffix))
        assert set(by_port) == {"internal"}, suffix
        assert by_port["internal"][0] == {"namespaceSelector": {"matchLabels": {NS: "monitoring"}}}
    assert all(p["spec"]["policyTypes"] == ["Ingress"] for p in of_kind(default_manifests, "NetworkPolicy"))


def test_an_empty_peer_list_admits_no_one(helm: Helm) -> None:
    manifests = helm.render({"networkPolicy": {"webhookFrom": []}})
    assert set(peers_by_port(policy(manifests, "-webhook"))) == {"internal"}


def test_the_egress_policy_lets_each_component_call_only_what_it_uses(helm: Helm) -> None:
    manifests = helm.render({"networkPolicy": {"egress": {"enabled": True}}})

    def egress_ports(suffix: str) -> set[int]:
        spec = policy(manifests, suffix)
        assert "Egress" in spec["policyTypes"]
        return {p["port"] for rule in spec["egress"] for p in rule.get("ports", [])}

    assert egress_ports("-worker") == {53, 9092, 5432, 443}
    assert egress_ports("-webhook") == {53, 9092}
    assert egress_ports("-bridge") == {53, 9092, 443}
    assert egress_ports("-topics") == {53, 9092}
    assert egress_ports("-report") == {53, 9092, 443, 6443, 5432}
    dns = policy(manifests, "-worker")["egress"][0]
    assert dns["to"][0]["namespaceSelector"] == {"matchLabels": {NS: "kube-system"}}


# --- drain vs grace ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"worker": {"config": {"worker_revoke_grace_ms": 120000}}}, "worker.config.worker_revoke_grace_ms = 120 s"),
        ({"bridge": {"config": {"bridge_shutdown_timeout_s": 50}}}, "bridge.config.bridge_shutdown_timeout_s = 50 s"),
        ({"webhook": {"preStopSleepSeconds": 30}}, "webhook: preStopSleepSeconds (30 s)"),
    ],
    ids=["worker", "bridge", "webhook"],
)
def test_a_drain_longer_than_the_grace_period_fails_to_render(helm: Helm, values: dict[str, Any], message: str) -> None:
    result = helm.template_text(values)
    assert result.returncode != 0
    assert message in result.stderr
    assert "terminationGracePeriodSeconds" in result.stderr


def test_a_drain_within_the_grace_period_renders(helm: Helm) -> None:
    values = {"worker": {"config": {"worker_revoke_grace_ms": 120000}, "terminationGracePeriodSeconds": 130}}
    assert helm.template_text(values).returncode == 0


# --- the report: output, namespace ---------------------------------------------------------------------------


def report_volumes(manifests: list[Manifest]) -> dict[str, dict[str, Any]]:
    spec = pod_spec(of_kind(manifests, "CronJob")[0])
    assert spec is not None
    return {v["name"]: v for v in spec["volumes"]}


def test_the_report_keeps_its_output_on_a_claim_the_chart_creates(default_manifests: list[Manifest]) -> None:
    (claim,) = of_kind(default_manifests, "PersistentVolumeClaim")
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    output = report_volumes(default_manifests)["output"]
    assert output == {"name": "output", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
    assert configmap(default_manifests, "report")["INTURN_REPORT_OUT_DIR"] == "/var/lib/inturn/reports"


def test_an_existing_claim_is_used_and_none_created(helm: Helm) -> None:
    manifests = helm.render({"report": {"output": {"existingClaim": "mine"}}})
    assert of_kind(manifests, "PersistentVolumeClaim") == []
    assert report_volumes(manifests)["output"]["persistentVolumeClaim"] == {"claimName": "mine"}


def test_object_storage_output_needs_no_volume(helm: Helm) -> None:
    manifests = helm.render({"report": {"output": {"uri": "s3a://bucket/inturn"}}})
    assert of_kind(manifests, "PersistentVolumeClaim") == []
    assert "output" not in report_volumes(manifests)
    assert configmap(manifests, "report")["INTURN_REPORT_OUT_DIR"] == "s3a://bucket/inturn"


def test_the_report_never_writes_to_an_empty_dir(helm: Helm) -> None:
    for values in ({}, {"report": {"spark": {"deployMode": "cluster"}}}):
        manifests = helm.render(values)
        assert "emptyDir" not in report_volumes(manifests)["output"]
        pods = named(manifests, "ConfigMap", "-report-pods")["data"]
        for template in pods.values():
            volumes = {v["name"]: v for v in yaml.safe_load(template)["spec"]["volumes"]}
            assert "emptyDir" not in volumes.get("output", {"persistentVolumeClaim": {}})


def test_a_contained_report_lives_in_its_namespace_with_the_least_rules(helm: Helm) -> None:
    manifests = helm.render(files=(ISOLATED,))
    report = [m for m in manifests if m["metadata"]["labels"].get("app.kubernetes.io/component") == "report"]
    kinds = {m["kind"] for m in report}
    assert {"CronJob", "ConfigMap", "ServiceAccount", "Role", "RoleBinding", "NetworkPolicy"} <= kinds
    assert {m["metadata"]["namespace"] for m in report} == {"inturn-reports"}
    others = [m for m in manifests if m not in report]
    assert {m["metadata"]["namespace"] for m in others} == {"inturn"}
    args = main_container(of_kind(manifests, "CronJob")[0])["args"][0]
    assert "spark.kubernetes.namespace=inturn-reports" in args
    (role,) = of_kind(manifests, "Role")
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert resources == {"pods", "configmaps", "services"}
    assert not any({"update", "patch", "*"} & set(rule["verbs"]) for rule in role["rules"])


# --- extra volumes, env, containers ------------------------------------------------------------------------


def test_a_ca_secret_reaches_every_pod_through_the_extra_values(helm: Helm) -> None:
    manifests = helm.render(files=(ISOLATED,))
    workloads = [m for m in manifests if m["kind"] in ("Deployment", "StatefulSet", "Job", "CronJob")]
    assert {m["metadata"]["labels"]["app.kubernetes.io/component"] for m in workloads} == {
        "worker", "webhook", "bridge", "topics", "report",
    }  # fmt: skip
    pods: list[dict[str, Any]] = [spec for m in workloads if (spec := pod_spec(m)) is not None]
    executor = yaml.safe_load(named(manifests, "ConfigMap", "-report-pods")["data"]["executor.yaml"])
    pods.append(executor["spec"])
    for spec in pods:
        assert {"name": "kafka-ca", "secret": {"secretName": "kafka-ca"}} in spec["volumes"]
        mounts = spec["containers"][0]["volumeMounts"]
        assert {"name": "kafka-ca", "mountPath": "/etc/inturn/kafka-ca", "readOnly": True} in mounts
    for version in KUBERNETES_VERSIONS:
        assert validation_errors(manifests, version) == []
        assert (
            validation_errors([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e"}, **executor}], version)
            == []
        )


def test_extra_env_init_containers_and_sidecars_land_in_the_worker_pod(helm: Helm) -> None:
    spec = pod_spec(named(helm.render(files=(ISOLATED,)), "StatefulSet", "-worker"))
    assert spec is not None
    assert [c["name"] for c in spec["initContainers"]] == ["wait-for-ca"]
    assert [c["name"] for c in spec["containers"]] == ["worker", "log-shipper"]
    worker = spec["containers"][0]
    assert {"name": "SSL_CERT_FILE", "value": "/etc/inturn/kafka-ca/ca.crt"} in worker["env"]
    assert {"configMapRef": {"name": "inturn-extra", "optional": True}} in worker["envFrom"]
    # The chart's own security context still applies to its container.
    assert worker["securityContext"]["readOnlyRootFilesystem"] is True
    assert len(list(containers(named(helm.render(files=(ISOLATED,)), "StatefulSet", "-worker")))) == 3


# --- distribution ----------------------------------------------------------------------------------------


def test_the_readme_table_is_generated_from_values_yaml() -> None:
    assert chart_readme.main(["--check"]) == 0, "run: python -m inturn_devtools.chart_readme"


def test_the_readme_table_follows_a_new_key() -> None:
    values = (CHART / "values.yaml").read_text() + "# -- A new key.\nnewKey: 3\n"
    readme = (CHART / "README.md").read_text()
    updated = chart_readme.readme(readme, values)
    assert updated != readme
    assert "| `newKey` | int | `3` | A new key. |" in updated


def test_the_readme_table_lists_nested_and_flow_keys() -> None:
    rows = chart_readme.table(
        "# -- A map.\na:\n  # -- Its b.\n  b: {c: 1}\n  # -- Peers.\n  to:\n    - x: 1\n      y: 2\n"
    )
    assert rows.splitlines()[2:] == [
        '| `a.b` | object | `{"c":1}` | Its b. |',
        '| `a.to` | list | `[{"x":1,"y":2}]` | Peers. |',
    ]


def test_the_chart_has_an_icon_and_the_repository_a_license() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["icon"].endswith("/deploy/helm/inturn/icon.svg")
    assert (CHART / "icon.svg").read_text().startswith("<svg")
    license_text = (CHART.parents[2] / "LICENSE").read_text()
    assert "Apache License" in license_text
    assert "Version 2.0, January 2004" in license_text
