"""A real Kubernetes API server for the chart tests: started by scripts/kube-apiserver.sh, talked to over HTTPS.

No kubelet and no controller manager run, so pods never start: the tests check what the API server itself decides
(schema, defaulting, admission, RBAC, upgrades), and install with ``--no-hooks`` (helm would wait for the topics
hook Job to complete); the hook's manifests are checked with a server-side dry run instead.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inturn_devtools.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "kube-apiserver.sh"
CRDS = Path(__file__).resolve().parent / "apiserver_crds.yaml"

#: Plural resource names of the kinds the chart renders (the path of a create).
PLURALS = {
    "ConfigMap": "configmaps",
    "Secret": "secrets",
    "Service": "services",
    "ServiceAccount": "serviceaccounts",
    "Pod": "pods",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
    "Job": "jobs",
    "CronJob": "cronjobs",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "NetworkPolicy": "networkpolicies",
    "Ingress": "ingresses",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "HorizontalPodAutoscaler": "horizontalpodautoscalers",
}


class ApiError(RuntimeError):
    """The API server answered with an error status."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


@dataclass
class ApiServer:
    """A running API server: its URL, CA, an admin token and the kubeconfig helm uses."""

    directory: Path
    url: str
    token: str
    ca_file: Path

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        impersonate: str | None = None,
    ) -> dict[str, Any]:
        """One API call as the admin (or impersonating ``user``); the decoded JSON answer."""
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        # The URL is the API server's https:// address from scripts/kube-apiserver.sh, never user input.
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method, headers=headers)  # noqa: S310
        if impersonate:
            # Impersonating a service account's user name, the API server adds its groups itself.
            request.add_header("Impersonate-User", impersonate)
        context = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as answer:  # noqa: S310 - https only, above
                result: dict[str, Any] = json.loads(answer.read() or b"{}")
                return result
        except urllib.error.HTTPError as exc:
            raise ApiError(exc.code, exc.read().decode(errors="replace")) from exc

    def wait_established(self, crd: str, timeout: float = 60.0) -> None:
        """Polls until the API server serves a CustomResourceDefinition (condition Established), or fails."""
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}"

        def established() -> bool:
            conditions = self.request("GET", path).get("status", {}).get("conditions", [])
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        wait_until(established, timeout, f"{crd} established on the API server", every=0.2)

    def create_namespace(self, name: str) -> None:
        """A namespace (and its default ServiceAccount, which no controller creates here)."""
        for path, body in (
            ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
            (
                f"/api/v1/namespaces/{name}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
            ),
        ):
            try:
                self.request("POST", path, body)
            except ApiError as exc:
                if exc.status != 409:
                    raise

    def dry_run_create(self, manifest: dict[str, Any], namespace: str) -> dict[str, Any]:
        """A server-side dry-run create of one namespaced manifest: admission and validation, nothing stored."""
        group_version = manifest["apiVersion"]
        base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
        plural = PLURALS[manifest["kind"]]
        ns = manifest.get("metadata", {}).get("namespace", namespace)
        return self.request("POST", f"{base}/namespaces/{ns}/{plural}?dryRun=All&fieldValidation=Strict", manifest)

    def can(self, user: str, groups: list[str], verb: str, resource: str, namespace: str, group: str = "") -> bool:
        """What `kubectl auth can-i VERB RESOURCE -n NAMESPACE --as USER` answers: a SubjectAccessReview."""
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": groups,
                "resourceAttributes": {
                    "namespace": namespace,
                    "verb": verb,
                    "resource": resource.split("/")[0],
                    "subresource": resource.partition("/")[2],
                    "group": group,
                },
            },
        }
        answer = self.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        return bool(answer["status"].get("allowed"))

    def rules(self, user: str, namespace: str) -> list[dict[str, Any]]:
        """The resource rules ``user`` has in ``namespace``: `kubectl auth can-i --list` (a SelfSubjectRulesReview)."""
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": namespace},
        }
        answer = self.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", review, impersonate=user)
        rules: list[dict[str, Any]] = answer["status"]["resourceRules"]
        return rules


def start(directory: Path) -> ApiServer:
    """Builds (first time) and starts etcd and kube-apiserver; fails with the script's output when it cannot."""
    result = subprocess.run(
        [str(SCRIPT), "start", str(directory)], capture_output=True, text=True, timeout=1800, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"scripts/kube-apiserver.sh start failed:\n{result.stderr[-4000:]}")
    env = dict(line.split("=", 1) for line in (directory / "env").read_text().splitlines() if "=" in line)
    return ApiServer(directory, env["APISERVER_URL"], env["ADMIN_TOKEN"], Path(env["CA_FILE"]))


def stop(directory: Path) -> None:
    """Stops what ``start`` started (by the pids it recorded)."""
    subprocess.run([str(SCRIPT), "stop", str(directory)], capture_output=True, timeout=60, check=False)
