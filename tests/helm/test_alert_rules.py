"""The chart's alerts and recording rules, held to the monitoring mixins' conventions and unit-tested by promtool.

promtool is built from the Prometheus Go module at a pinned version (scripts/install-promtool.sh); its unit tests
(tests/helm/rules/alerts.test.yaml) run against the rules ``helm template`` renders.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm.chart import CHART, REPO, Helm, Manifest
from tests.helm.promtool import PromtoolMissing, install_promtool, rules_file, run, write_rules

pytestmark = [pytest.mark.helm, pytest.mark.timeout(1800)]

UNIT_TESTS = Path(__file__).with_name("rules") / "alerts.test.yaml"
OPERATIONS = REPO / "docs" / "operations.md"
#: values.yaml's metrics.prometheusRule.runbookBaseUrl, written out here so that a change to it is seen.
RUNBOOK_BASE = "https://github.com/inturn/inturn/blob/main/docs/operations.md"
#: Everything on: ci/full-values.yaml enables the PrometheusRule with kafka-exporter; kube-state-metrics is on by
#: default. The unit tests' series name this render's release ("rel") and namespace ("inturn").
FULL = (CHART / "ci" / "full-values.yaml",)

_AGGREGATION = re.compile(
    r"\b(sum|min|max|avg|count|group|stddev|stdvar|topk|bottomk|quantile|count_values|limitk|limit_ratio)\s*"
    r"(?:(by|without)\s*\(([^)]*)\))?\s*\("
)
_RECORD_NAME = re.compile(r"^(?P<level>[a-z]+(?:_[a-z]+)*):(?P<metric>[a-z][a-z0-9_]*):(?P<ops>[a-z][a-z0-9_]*)$")
_RECORDED = re.compile(r"\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b")


@pytest.fixture(scope="session")
def promtool() -> Path:
    """The pinned promtool; a missing one FAILS the tests (CI must run the rule tests)."""
    try:
        return install_promtool()
    except PromtoolMissing as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="module")
def monitored(helm: Helm) -> list[Manifest]:
    return helm.render(files=FULL)


def rules_of(manifests: list[Manifest]) -> list[dict[str, Any]]:
    return [rule for group in rules_file(manifests)["groups"] for rule in group["rules"]]


def alerts_of(manifests: list[Manifest]) -> list[dict[str, Any]]:
    return [rule for rule in rules_of(manifests) if "alert" in rule]


def records_of(manifests: list[Manifest]) -> list[dict[str, Any]]:
    return [rule for rule in rules_of(manifests) if "record" in rule]


def aggregation_faults(expr: str) -> list[str]:
    """Aggregations of ``expr`` that do not keep both ``namespace`` and ``job`` (``by`` must name them)."""
    faults = []
    for match in _AGGREGATION.finditer(expr):
        _operator, modifier, labels = match.groups()
        kept = {label.strip() for label in (labels or "").split(",")}
        if modifier != "by" or not {"namespace", "job"} <= kept:
            faults.append(match.group(0))
    return faults


def github_anchors(markdown: str) -> dict[str, str]:
    """Heading anchor (as GitHub makes it) -> the text of that section up to the next heading."""
    sections: dict[str, str] = {}
    anchor = None
    for line in markdown.splitlines():
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        if heading:
            text = heading.group(1).strip().lower()
            anchor = re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", text))
            sections[anchor] = ""
        elif anchor is not None:
            sections[anchor] += line + "\n"
    return sections


def unit_tests_for(manifests: list[Manifest], directory: Path) -> Path:
    """The unit-test file beside the rendered rules, each expected alert completed with its description and runbook.

    The summaries (the templated text) are written by hand in the test file; the description is the alert's static
    text and the runbook URL is checked on its own (test_every_alert_has_a_runbook_section_in_operations_md).
    """
    write_rules(manifests, directory / "inturn-rules.yaml")
    descriptions = {rule["alert"]: rule["annotations"]["description"] for rule in alerts_of(manifests)}
    tests = yaml.safe_load(UNIT_TESTS.read_text())
    for case in tests["tests"]:
        for check in case["alert_rule_test"]:
            for alert in check["exp_alerts"]:
                alert["exp_annotations"]["description"] = descriptions[check["alertname"]]
                alert["exp_annotations"]["runbook_url"] = f"{RUNBOOK_BASE}#{check['alertname'].lower()}"
    path = directory / UNIT_TESTS.name
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    return path


# ---------------------------------------------------------------------------------------------------- promtool


def test_promtool_check_rules_accepts_the_rendered_rules(
    promtool: Path, monitored: list[Manifest], tmp_path: Path
) -> None:
    done = run(promtool, "check", "rules", str(write_rules(monitored, tmp_path / "rules.yaml")))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules_of(monitored))} rules found" in done.stdout


def test_promtool_check_rules_refuses_a_broken_rule(promtool: Path, tmp_path: Path) -> None:
    broken = tmp_path / "rules.yaml"
    broken.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "sum(up"}]}]}))
    assert run(promtool, "check", "rules", str(broken)).returncode != 0


def test_promtool_unit_tests_pass(promtool: Path, monitored: list[Manifest], tmp_path: Path) -> None:
    tests = unit_tests_for(monitored, tmp_path)
    done = run(promtool, "test", "rules", tests.name, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_unit_tests_fail_when_an_alert_stops_firing(promtool: Path, helm: Helm, tmp_path: Path) -> None:
    """A threshold raised above the firing case's 2 stuck rooms: promtool must report InturnStuckRooms' case."""
    raised = helm.render(
        {"metrics": {"prometheusRule": {"thresholds": {"stuckRooms": 5}}}},
        files=FULL,
    )
    done = run(promtool, "test", "rules", unit_tests_for(raised, tmp_path).name, cwd=tmp_path)
    assert done.returncode != 0
    assert "InturnStuckRooms" in done.stdout + done.stderr


def test_every_alert_has_a_firing_and_a_silent_case(monitored: list[Manifest]) -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for case in yaml.safe_load(UNIT_TESTS.read_text())["tests"]:
        for check in case["alert_rule_test"]:
            (firing if check["exp_alerts"] else silent).add(check["alertname"])
    alerts = {rule["alert"] for rule in alerts_of(monitored)}
    assert len(alerts) >= 20
    assert alerts - firing == set(), "alerts without a case where they fire"
    assert alerts - silent == set(), "alerts without a case where they stay silent"
    assert (firing | silent) - alerts == set(), "cases for alerts the chart does not have"


def test_every_firing_case_reaches_alertmanager_with_namespace_and_job() -> None:
    for case in yaml.safe_load(UNIT_TESTS.read_text())["tests"]:
        for check in case["alert_rule_test"]:
            for alert in check["exp_alerts"]:
                assert {"namespace", "job", "severity"} <= alert["exp_labels"].keys(), case["name"]


# ---------------------------------------------------------------------------------------------------- conventions


def test_every_alert_has_severity_summary_description_and_runbook(monitored: list[Manifest]) -> None:
    for rule in alerts_of(monitored):
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        annotations = rule["annotations"]
        assert set(annotations) == {"summary", "description", "runbook_url"}, rule["alert"]
        assert annotations["summary"], rule["alert"]
        assert annotations["description"], rule["alert"]
        assert annotations["runbook_url"] == f"{RUNBOOK_BASE}#{rule['alert'].lower()}"


def test_every_alert_has_a_runbook_section_in_operations_md(monitored: list[Manifest]) -> None:
    sections = github_anchors(OPERATIONS.read_text())
    for rule in alerts_of(monitored):
        anchor = rule["annotations"]["runbook_url"].split("#", 1)[1]
        assert anchor in sections, f"docs/operations.md has no section #{anchor} for {rule['alert']}"
        # A section that says what to do, not a bare heading.
        assert len(sections[anchor].split()) >= 25, f"the runbook section of {rule['alert']} is too short"


def test_the_anchor_check_reads_headings_as_github_does() -> None:
    sections = github_anchors("# Title\n\n## Dead letters\ntext\n### InturnStuckRooms\nmore text\n")
    assert sections.keys() == {"title", "dead-letters", "inturnstuckrooms"}
    assert sections["inturnstuckrooms"].split() == ["more", "text"]


def test_the_runbook_base_url_is_a_value(helm: Helm) -> None:
    base = "https://runbooks.example.com/inturn"
    manifests = helm.render({"metrics": {"prometheusRule": {"runbookBaseUrl": base}}}, files=FULL)
    urls = {rule["annotations"]["runbook_url"] for rule in alerts_of(manifests)}
    assert urls
    assert all(url.startswith(base + "#inturn") for url in urls)


def test_every_aggregation_keeps_namespace_and_job(monitored: list[Manifest]) -> None:
    for rule in rules_of(monitored):
        assert aggregation_faults(rule["expr"]) == [], rule.get("alert") or rule["record"]


def test_the_aggregation_check_finds_a_bare_sum_and_a_dropped_job() -> None:
    expr = "sum(rate(x[5m])) / sum by (namespace) (y) + max by (namespace, job) (z) + sum without (pod) (w)"
    assert aggregation_faults(expr) == ["sum(", "sum by (namespace) (", "sum without (pod) ("]
    assert aggregation_faults("histogram_quantile(0.9, x) + max_over_time(y[5m]) + z_count") == []


def test_absent_guards_fire_for_each_component_with_no_target(helm: Helm, monitored: list[Manifest]) -> None:
    guards = {rule["alert"]: rule["expr"] for rule in alerts_of(monitored) if "absent(" in rule["expr"]}
    assert guards == {
        "InturnWorkerTargetMissing": 'absent(up{namespace="inturn", job="rel-inturn-worker"})',
        "InturnWebhookTargetMissing": 'absent(up{namespace="inturn", job="rel-inturn-webhook"})',
        "InturnBridgeTargetMissing": 'absent(up{namespace="inturn", job="rel-inturn-bridge"})',
    }
    # A disabled component has no guard (it would fire for ever).
    without_bridge = helm.render({"bridge": {"enabled": False}}, files=FULL)
    assert "InturnBridgeTargetMissing" not in {rule["alert"] for rule in alerts_of(without_bridge)}


def test_stuck_rooms_text_says_what_the_gauge_counts(monitored: list[Manifest]) -> None:
    """The worker counts rooms whose head waited more than TWICE the ack timeout (services/worker room.stuck)."""
    (rule,) = [rule for rule in alerts_of(monitored) if rule["alert"] == "InturnStuckRooms"]
    for text in rule["annotations"]["summary"], rule["annotations"]["description"]:
        assert "twice" in text
        assert "past the ack timeout" not in text
    source = (REPO / "services" / "worker" / "inturn_worker" / "room.py").read_text()
    assert "> 2 * self._delivery.ack_timeout_s(head.platform)" in source


# ---------------------------------------------------------------------------------------------------- recording rules


def test_recording_rules_are_named_level_metric_operations(monitored: list[Manifest]) -> None:
    records = records_of(monitored)
    assert len(records) >= 12
    for rule in records:
        name = _RECORD_NAME.match(rule["record"])
        assert name, f"{rule['record']} is not level:metric:operations"
        by = re.match(r"^\s*sum by \(([^)]*)\)", rule["expr"])
        if by:  # the level names the labels kept (le is the bucket boundary, not a level)
            kept = [label.strip() for label in by.group(1).split(",") if label.strip() != "le"]
            assert name["level"] == "_".join(kept), rule["record"]
            assert name["ops"] == "rate5m", rule["record"]
            assert "[5m]" in rule["expr"], rule["record"]
        else:
            assert name["ops"] == "histogram_quantile", rule["record"]
            assert rule["labels"]["quantile"] in ("0.5", "0.99")


def test_every_recorded_series_is_used_and_every_used_one_is_recorded(
    monitored: list[Manifest], dashboard_exprs: list[str]
) -> None:
    recorded = {rule["record"] for rule in records_of(monitored)}
    used_by_rules = {name for rule in rules_of(monitored) for name in _RECORDED.findall(rule["expr"])}
    used_by_alerts = {name for rule in alerts_of(monitored) for name in _RECORDED.findall(rule["expr"])}
    used_by_dashboard = {name for expr in dashboard_exprs for name in _RECORDED.findall(expr)}
    assert (used_by_rules | used_by_dashboard) - recorded == set()
    assert recorded - (used_by_rules | used_by_dashboard) == set(), "recording rules nothing reads"
    # What the alerts and the dashboard share: at least a rate ratio and a quantile.
    shared = used_by_alerts & used_by_dashboard
    assert "namespace_job_pod_platform:inturn_worker_ack_timeouts:rate5m" in shared
    assert "namespace_job_pod_platform:inturn_worker_ack_latency_seconds:histogram_quantile" in shared
    assert "namespace_job_pod_endpoint_outcome:inturn_webhook_requests:rate5m" in shared


def test_neither_dashboard_nor_alerts_compute_quantiles_from_raw_buckets(
    monitored: list[Manifest], dashboard_exprs: list[str]
) -> None:
    alert_exprs = [rule["expr"] for rule in alerts_of(monitored)]
    for expr in alert_exprs + dashboard_exprs:
        assert not re.search(r"(?<![:\w])inturn_\w+_bucket\b", expr), expr


@pytest.fixture(scope="module")
def dashboard_exprs(monitored: list[Manifest]) -> list[str]:
    from tests.helm.test_chart_metrics import dashboard_queries

    return dashboard_queries(monitored)


def test_disabled_rules_render_nothing(helm: Helm) -> None:
    assert [m for m in helm.render() if m["kind"] == "PrometheusRule"] == []


def test_every_rule_reads_only_its_own_release_series(monitored: list[Manifest]) -> None:
    """Two releases in one Prometheus: neither records nor alerts on the other's series (nor records one twice)."""
    selector = re.compile(r"(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\{(?P<matchers>[^}]*)\}")
    inturn_names = re.compile(r"(?<![\w:])(?:[a-z_]+:)?inturn_[a-z0-9_]+(?::[a-z0-9_]+)?")
    for rule in rules_of(monitored):
        expr = re.sub(r'"[^"]*"', '""', rule["expr"])
        bare = [name.group(0) for name in inturn_names.finditer(expr) if not expr[name.end() :].startswith("{")]
        assert bare == [], f"{rule.get('alert') or rule['record']} reads {bare} without a selector"
        for found in selector.finditer(rule["expr"]):
            component = re.search(r"inturn_(worker|webhook|bridge)_", found["name"])
            if component:
                assert f'namespace="inturn", job="rel-inturn-{component.group(1)}"' in found["matchers"], found[0]
            elif found["name"] != "kafka_consumergroup_lag":  # kafka-exporter's series are another namespace's
                assert 'namespace="inturn"' in found["matchers"], found[0]
