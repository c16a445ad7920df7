"""The chart against a real Kubernetes API server (etcd + kube-apiserver v1.34, RBAC on; scripts/kube-apiserver.sh).

`helm install` then `helm upgrade` of every values scenario, server-side: the API server's validation, defaulting,
admission and RBAC decide. Values the offline checks let through but the server refuses fail here. The report's
ServiceAccount can do what Spark's driver does (`kubectl auth can-i`, as SubjectAccessReviews) and nothing more (its
rules, as `kubectl auth can-i --list` shows them, are exactly the driver's). No kubelet runs, so no pod starts:
installs use --no-hooks (helm would wait for the topics hook Job) and the hooks get a server-side dry run instead.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm import apiserver
from tests.helm.apiserver import ApiError, ApiServer
from tests.helm.chart import CHART, CI_VALUES, RELEASE, Helm, Manifest

pytestmark = [pytest.mark.helm, pytest.mark.timeout(1800)]

SCENARIOS = [pytest.param(None, id="default"), *(pytest.param(f, id=f.stem) for f in CI_VALUES)]

#: What Spark's driver does with the API server (and spark-submit in cluster mode): (group, resource, verb).
SPARK_DRIVER_RULES = frozenset(
    {("", "pods", v) for v in ("get", "list", "watch", "create", "delete", "deletecollection")}
    | {("", "configmaps", v) for v in ("get", "list", "create", "delete", "deletecollection")}
    | {("", "services", v) for v in ("get", "create", "delete", "deletecollection")}
)

#: What every authenticated user may do (system:basic-user and friends): asking what it may do.
SELF_REVIEWS = frozenset(
    {
        ("authorization.k8s.io", "selfsubjectaccessreviews", "create"),
        ("authorization.k8s.io", "selfsubjectrulesreviews", "create"),
        ("authentication.k8s.io", "selfsubjectreviews", "create"),
    }
)


#: `kubectl auth can-i` questions the report's account must answer yes to (what the driver does) ...
DRIVER_CAN = [
    ("create", "pods"),
    ("watch", "pods"),
    ("deletecollection", "pods"),
    ("create", "configmaps"),
    ("create", "services"),
]
#: ... and no to (resource "pods/exec" is the exec subresource).
DRIVER_CANNOT = [
    ("get", "secrets"),
    ("list", "secrets"),
    ("create", "pods/exec"),
    ("get", "pods/log"),
    ("patch", "pods"),
    ("create", "persistentvolumeclaims"),
    ("create", "rolebindings"),
]


@pytest.fixture(scope="session")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """etcd and kube-apiserver on free loopback ports, with the stand-in CRDs; stopped after the session."""
    directory = tmp_path_factory.mktemp("kube-apiserver")
    try:
        server = apiserver.start(directory)
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        crds = list(yaml.safe_load_all(apiserver.CRDS.read_text()))
        for crd in crds:
            server.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        for crd in crds:
            server.wait_established(crd["metadata"]["name"])
        yield server
    finally:
        apiserver.stop(directory)


def kube(helm: Helm, api: ApiServer, *args: str) -> subprocess.CompletedProcess[str]:
    """helm against the API server."""
    return helm.run(*args, "--kubeconfig", str(api.kubeconfig))


def values_of(files: tuple[Path, ...]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for f in files:
        merged.update(yaml.safe_load(f.read_text()) or {})
    return merged


def prepare(api: ApiServer, namespace: str, files: tuple[Path, ...]) -> None:
    """The release's namespace, and the report's when the values give it one of its own."""
    api.create_namespace(namespace)
    report_ns = (values_of(files).get("report") or {}).get("namespace")
    if report_ns:
        api.create_namespace(report_ns)


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def granted(api: ApiServer, user: str, namespace: str) -> set[tuple[str, str, str]]:
    """The (group, resource, verb) triples ``user`` holds in ``namespace``, past the self-reviews everyone has."""
    triples = set()
    for rule in api.rules(user, namespace):
        for group in rule.get("apiGroups", [""]):
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    triples.add((group, resource, verb))
    return triples - SELF_REVIEWS


@pytest.mark.parametrize("file", SCENARIOS)
def test_install_then_upgrade_against_the_api_server(helm: Helm, api: ApiServer, file: Path | None) -> None:
    files = (file,) if file else ()
    namespace = f"ci-{file.stem.removesuffix('-values') if file else 'default'}"
    prepare(api, namespace, files)
    flags = [a for f in files for a in ("-f", str(f))]
    install = kube(helm, api, "install", RELEASE, str(CHART), "-n", namespace, "--no-hooks", *flags)
    assert install.returncode == 0, install.stderr
    # NOTES warns loudly exactly when the bridge takes unauthenticated pushes (the isolated scenario opts out).
    opted_out = ((values_of(files).get("bridge") or {}).get("push") or {}).get("allowUnauthenticated") is True
    assert ("WARNING: UNAUTHENTICATED PUSH" in install.stdout) == opted_out, install.stdout
    # ... and when the dashboard is on without the recording rules its panels read (the default values).
    metrics = values_of(files).get("metrics") or {}
    rules_on = (metrics.get("prometheusRule") or {}).get("enabled") is True
    dashboard_on = (metrics.get("dashboard") or {}).get("enabled", True) is not False
    empty_panels = "its panels stay empty" in install.stdout
    assert empty_panels == (dashboard_on and not rules_on), install.stdout
    upgrade = kube(
        helm, api, "upgrade", RELEASE, str(CHART), "-n", namespace, "--no-hooks", *flags,
        "--set", "commonLabels.inturn-upgraded=yes",
    )  # fmt: skip
    assert upgrade.returncode == 0, upgrade.stderr
    history = kube(helm, api, "history", RELEASE, "-n", namespace, "-o", "json")
    assert [(r["revision"], r["status"]) for r in json.loads(history.stdout)] == [(1, "superseded"), (2, "deployed")]
    # The upgrade reached the server: every Service the chart made carries the new label.
    services = api.request("GET", f"/api/v1/namespaces/{namespace}/services")["items"]
    assert services
    assert {s["metadata"]["labels"].get("inturn-upgraded") for s in services} == {"yes"}


@pytest.mark.parametrize("file", SCENARIOS)
def test_the_hooks_pass_a_server_side_dry_run(helm: Helm, api: ApiServer, file: Path | None) -> None:
    files = (file,) if file else ()
    namespace = f"dry-{file.stem.removesuffix('-values') if file else 'default'}"
    prepare(api, namespace, files)
    hooks = [m for m in helm.render(files=files) if "helm.sh/hook" in m["metadata"].get("annotations", {})]
    for manifest in hooks:
        manifest["metadata"]["namespace"] = namespace
        created = api.dry_run_create(manifest, namespace)
        assert created["metadata"]["name"] == manifest["metadata"]["name"]


@pytest.mark.parametrize(
    ("values", "flags", "answer"),
    [
        (
            {"worker": {"resources": {"requests": {"cpu": "250m", "memory": "12XB"}, "limits": {"memory": "1Gi"}}}},
            (),
            "quantities must match the regular expression",
        ),
        # The schema refuses negative replicas too; skipped here so that the server's own check is what answers.
        ({"worker": {"replicas": -1}}, ("--skip-schema-validation",), "must be greater than or equal to 0"),
    ],
    ids=["bad-resource-quantity", "negative-replicas"],
)
def test_a_faulty_values_file_fails_at_the_server(
    helm: Helm, api: ApiServer, values: dict[str, Any], flags: tuple[str, ...], answer: str, tmp_path: Path
) -> None:
    path = tmp_path / "fault-values.yaml"
    path.write_text(yaml.safe_dump(values))
    offline = helm.run("template", RELEASE, str(CHART), "-f", str(path), *flags)
    assert offline.returncode == 0, offline.stderr
    namespace = f"fault-{len(flags)}"
    api.create_namespace(namespace)
    install = kube(helm, api, "install", RELEASE, str(CHART), "-n", namespace, "--no-hooks", "-f", str(path), *flags)
    assert install.returncode != 0
    assert answer in install.stderr, install.stderr


def report_account(manifests: list[Manifest]) -> tuple[str, str]:
    """(namespace, name) of the report's ServiceAccount in a render."""
    (account,) = [
        m
        for m in manifests
        if m["kind"] == "ServiceAccount" and m["metadata"]["labels"].get("app.kubernetes.io/component") == "report"
    ]
    return account["metadata"]["namespace"], account["metadata"]["name"]


#: The report's own namespace of the isolated release the RBAC tests install.
ISOLATED_REPORTS = "rbac-isolated-reports"


@pytest.fixture(scope="module")
def installed(helm: Helm, api: ApiServer) -> dict[str, tuple[str, str]]:
    """The default and the isolated scenario installed; the report's ServiceAccount of each."""
    accounts = {}
    for name, files in (("default", ()), ("isolated", (CHART / "ci" / "isolated-values.yaml",))):
        namespace = f"rbac-{name}"
        prepare(api, namespace, files)
        flags = [a for f in files for a in ("-f", str(f))]
        if files:  # the install test above already has a release's report in the file's namespace
            api.create_namespace(ISOLATED_REPORTS)
            flags += ["--set", f"report.namespace={ISOLATED_REPORTS}"]
        result = kube(helm, api, "install", RELEASE, str(CHART), "-n", namespace, "--no-hooks", *flags)
        assert result.returncode == 0, result.stderr
        rendered = helm.run("template", RELEASE, str(CHART), "--namespace", namespace, *flags)
        assert rendered.returncode == 0, rendered.stderr
        accounts[name] = report_account([m for m in yaml.safe_load_all(rendered.stdout) if m])
    return accounts


@pytest.fixture(params=["default", "isolated"])
def report_user(installed: dict[str, tuple[str, str]], request: pytest.FixtureRequest) -> tuple[str, str]:
    """The report account's user and its namespace, in either scenario."""
    namespace, name = installed[request.param]
    return service_account_user(namespace, name), namespace


def test_the_report_account_holds_exactly_what_the_spark_driver_needs(
    api: ApiServer, report_user: tuple[str, str]
) -> None:
    user, namespace = report_user
    assert granted(api, user, namespace) == set(SPARK_DRIVER_RULES)


def test_the_report_account_can_do_what_the_driver_does_and_nothing_more(
    api: ApiServer, report_user: tuple[str, str]
) -> None:
    user, namespace = report_user
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]
    for verb, resource in DRIVER_CAN:
        assert api.can(user, groups, verb, resource, namespace), f"cannot {verb} {resource}"
    for verb, resource in DRIVER_CANNOT:
        group = "rbac.authorization.k8s.io" if resource == "rolebindings" else ""
        assert not api.can(user, groups, verb, resource, namespace, group), f"can {verb} {resource}"
    assert not api.can(user, groups, "list", "nodes", "")
    assert not api.can(user, groups, "create", "pods", "kube-system")


def test_an_isolated_report_reaches_nothing_of_the_services(
    api: ApiServer, installed: dict[str, tuple[str, str]]
) -> None:
    namespace, name = installed["isolated"]
    assert namespace == ISOLATED_REPORTS
    user = service_account_user(namespace, name)
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]
    for verb, resource in [("create", "pods"), ("delete", "pods"), ("get", "configmaps"), ("list", "services")]:
        assert not api.can(user, groups, verb, resource, "rbac-isolated"), f"can {verb} {resource} in the release's"
    assert granted(api, user, "rbac-isolated") == set()


def test_the_services_account_holds_nothing(api: ApiServer, installed: dict[str, tuple[str, str]]) -> None:
    assert granted(api, service_account_user("rbac-default", f"{RELEASE}-inturn"), "rbac-default") == set()


def test_the_rules_check_can_fail(api: ApiServer, installed: dict[str, tuple[str, str]]) -> None:
    # A Role granting Secrets to the report's account shows up in what it holds, so the exact match above can fail.
    namespace, name = installed["default"]
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "extra"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "extra"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extra"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    base = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    api.request("POST", f"{base}/roles", role)
    api.request("POST", f"{base}/rolebindings", binding)
    try:
        held = granted(api, service_account_user(namespace, name), namespace)
        assert held - set(SPARK_DRIVER_RULES) == {("", "secrets", "get")}
    finally:
        for kind in ("rolebindings", "roles"):
            with contextlib.suppress(ApiError):
                api.request("DELETE", f"{base}/{kind}/extra")
