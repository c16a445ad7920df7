"""The alerts and the dashboard query only metrics the services really export (read from libs/inturn/metrics)."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.metrics import MetricWrapperBase

import inturn.metrics
from inturn.metrics.lockfree import LockFreeCounter, LockFreeHistogram
from tests.helm.chart import CHART, Helm, Manifest, chart_tools, of_kind

pytestmark = [pytest.mark.helm, pytest.mark.timeout(1800)]

#: The sample names each metric type exposes, after the family name.
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
    "stateset": ("",),
    "enum": ("",),
}

_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*\w+\)$")
_INTURN_NAME = re.compile(r"(?<![A-Za-z0-9_:])inturn_[A-Za-z0-9_:]+")


def exported_families() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Family name -> (type, label names) of every metric object in ``inturn.metrics.*``."""
    families: dict[str, tuple[str, tuple[str, ...]]] = {}
    for info in pkgutil.iter_modules(inturn.metrics.__path__):
        module = importlib.import_module(f"inturn.metrics.{info.name}")
        for value in vars(module).values():
            if isinstance(value, MetricWrapperBase | LockFreeCounter | LockFreeHistogram):
                if isinstance(value, LockFreeCounter | LockFreeHistogram):
                    labels = tuple(value.labelnames)
                else:
                    labels = tuple(value._labelnames)
                for family in value.describe():
                    families[family.name] = (family.type, labels)
    return families


def exported_metric_names() -> set[str]:
    """Every sample name the metric objects in ``inturn.metrics.*`` expose."""
    names: set[str] = set()
    for info in pkgutil.iter_modules(inturn.metrics.__path__):
        module = importlib.import_module(f"inturn.metrics.{info.name}")
        for value in vars(module).values():
            if isinstance(value, MetricWrapperBase | LockFreeCounter | LockFreeHistogram):
                for family in value.describe():
                    names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


#: A recorded series (level:metric:operations) whose metric is an inturn one.
_RECORDED_INTURN = re.compile(r"(?<![A-Za-z0-9_:])[a-z_]+:(inturn_[a-z0-9_]+):[a-z0-9_]+")


def inturn_names_in(promql: str) -> set[str]:
    """The inturn_* metric names a PromQL expression uses (label values in quotes are not names).

    For a recorded series ``level:inturn_x:rate5m`` it is the counter the rate was taken of (``inturn_x_total``);
    for other operations (``:histogram_quantile``) the metric part itself.
    """
    unquoted = _QUOTED.sub('""', promql)
    names = set(_INTURN_NAME.findall(unquoted))
    for match in _RECORDED_INTURN.finditer(unquoted):
        metric = match.group(1)
        rate_of_counter = match.group(0).endswith(":rate5m") and not metric.endswith("_bucket")
        names.add(metric + "_total" if rate_of_counter else metric)
    return names


def alert_rules(manifests: list[Manifest]) -> list[dict[str, Any]]:
    """Every rule of the PrometheusRule (alerts and recording rules)."""
    (rule,) = of_kind(manifests, "PrometheusRule")
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def dashboard_queries(manifests: list[Manifest]) -> list[str]:
    """Every PromQL expression of every dashboard in the dashboard ConfigMap (panels and variables)."""
    (configmap,) = [m for m in of_kind(manifests, "ConfigMap") if m["metadata"]["name"].endswith("-dashboard")]
    queries: list[str] = []
    for text in configmap["data"].values():
        dashboard = json.loads(text)
        panels = list(dashboard["panels"])
        while panels:
            panel = panels.pop()
            panels.extend(panel.get("panels", []))
            queries.extend(target["expr"] for target in panel.get("targets", []))
        for variable in dashboard.get("templating", {}).get("list", []):
            query = variable.get("query")
            queries.append(query["query"] if isinstance(query, dict) else str(query or ""))
    return queries


#: Grafana's variables, replaced by plain values so that a PromQL parser reads the dashboard's queries.
GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$namespace": "inturn",
    "$release": "rel-inturn",
    "$pod": ".*",
    "$platform": ".*",
}


def promql_errors(expressions: list[str]) -> list[str]:
    """What a real PromQL parser (promql-parser, in the chart tools' venv) finds wrong with ``expressions``."""
    checker = Path(__file__).with_name("promql_check.py")
    done = subprocess.run(
        [str(chart_tools() / "python"), str(checker)],
        input=json.dumps(expressions),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found: list[str] = json.loads(done.stdout)
    return found


@pytest.fixture(scope="module")
def monitored(helm: Helm) -> list[Manifest]:
    """Everything on, alerts included."""
    return helm.render(files=(CHART / "ci" / "full-values.yaml",))


def test_the_services_export_the_metrics_the_alerts_are_about() -> None:
    exported = exported_metric_names()
    assert {
        "inturn_worker_ack_timeouts_total",
        "inturn_worker_dead_letters_total",
        "inturn_worker_stuck_rooms",
        "inturn_worker_circuit_open",
        "inturn_worker_commit_lag_messages",
        "inturn_worker_ack_latency_seconds_bucket",
    } <= exported


def test_the_name_check_sees_names_and_ignores_label_values() -> None:
    expr = 'sum(rate(inturn_worker_nope_total{job="inturn_worker_quoted"}[5m])) / inturn_x:ratio > 0'
    assert inturn_names_in(expr) == {"inturn_worker_nope_total", "inturn_x:ratio"}
    recorded = (
        "a_b:inturn_worker_sent:rate5m + a:inturn_h_seconds_bucket:rate5m + a:inturn_h_seconds:histogram_quantile"
    )
    assert inturn_names_in(recorded) == {"inturn_worker_sent_total", "inturn_h_seconds_bucket", "inturn_h_seconds"}


def test_every_rule_expression_uses_only_exported_inturn_metrics(monitored: list[Manifest]) -> None:
    exported = exported_metric_names() | {f.removesuffix("_bucket") for f in exported_metric_names()}
    used = set()
    for rule in alert_rules(monitored):
        names = inturn_names_in(rule["expr"])
        name = rule.get("alert") or rule["record"]
        assert names <= exported, f"{name} uses {sorted(names - exported)}, which no service exports"
        used |= names
    assert len(used) >= 15


def test_the_alerts_cover_lag_timeouts_dead_letters_stuck_rooms_and_breakers(monitored: list[Manifest]) -> None:
    alerts = {rule["alert"]: rule["expr"] for rule in alert_rules(monitored) if "alert" in rule}
    assert "inturn_worker_commit_lag_messages" in alerts["InturnConsumerLagHigh"]
    assert "kafka_consumergroup_lag" in alerts["InturnConsumerGroupLagHigh"]
    assert "inturn_worker_ack_timeouts:rate5m" in alerts["InturnAckTimeoutRateHigh"]
    assert "inturn_worker_dead_letters_total" in alerts["InturnDeadLettersGrowing"]
    assert "inturn_worker_stuck_rooms" in alerts["InturnStuckRooms"]
    assert "inturn_worker_circuit_open" in alerts["InturnCircuitBreakerOpen"]
    # The selectors name the Services the ServiceMonitors scrape, so the alerts see this release's series only.
    assert 'job="rel-inturn-worker"' in alerts["InturnStuckRooms"]


def test_every_dashboard_query_uses_only_exported_inturn_metrics(monitored: list[Manifest]) -> None:
    exported = exported_metric_names()
    queries = dashboard_queries(monitored)
    assert len(queries) >= 15
    exported |= {name.removesuffix("_bucket") for name in exported}
    for query in queries:
        names = inturn_names_in(query)
        assert names <= exported, f"dashboard query {query!r} uses {sorted(names - exported)}"


def test_every_alert_and_dashboard_expression_is_valid_promql(monitored: list[Manifest]) -> None:
    expressions = [rule["expr"] for rule in alert_rules(monitored)]
    for query in dashboard_queries(monitored):
        for variable, value in GRAFANA_VARIABLES.items():
            query = query.replace(variable, value)
        # Grafana's label_values(selector, label) is not PromQL; its selector is.
        expressions.append(_LABEL_VALUES.sub(r"\1", query))
    assert promql_errors(expressions) == []


def test_the_promql_check_catches_a_broken_expression() -> None:
    assert len(promql_errors(["sum(rate(inturn_worker_consumed_total[5m])", "up == 1"])) == 1


# ---------------------------------------------------------------------------------------------------- dashboard

#: The dashboard's variables, in the order Grafana must resolve them (each may use only those before it).
DASHBOARD_VARIABLES = ("datasource", "namespace", "release", "pod", "platform")
_SELECTOR = re.compile(r"(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\{(?P<matchers>[^}]*)\}")
_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_BARE_INTURN = re.compile(r"(?<![\w:])(?:[a-z_]+:)?inturn_[a-z0-9_]+(?::[a-z0-9_]+)?(?![\w:]|\s*\{)")


def dashboards(manifests: list[Manifest]) -> list[dict[str, Any]]:
    """Every dashboard of the dashboard ConfigMap, parsed."""
    (configmap,) = [m for m in of_kind(manifests, "ConfigMap") if m["metadata"]["name"].endswith("-dashboard")]
    return [json.loads(text) for text in configmap["data"].values()]


def panels_of(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows' nested panels included; rows themselves are not panels that query."""
    found, stack = [], list(dashboard["panels"])
    while stack:
        panel = stack.pop()
        stack.extend(panel.get("panels", []))
        if panel["type"] != "row":
            found.append(panel)
    return found


def inturn_component(metric: str) -> str | None:
    """worker, webhook or bridge for an inturn metric or a series recorded from one; None for other names."""
    found = re.search(r"(?:^|:)inturn_(worker|webhook|bridge)_", metric)
    return found.group(1) if found else None


def filter_faults(expr: str, platform_labelled: set[str]) -> list[str]:
    """What a panel query's selectors miss of the dashboard's variables.

    Every selector of an inturn series must match namespace="$namespace", job="$release-<component>" and
    pod=~"$pod"; a series with a platform label (``platform_labelled``: family names) also platform=~"$platform".
    """
    faults = [f"{bare.group(0)} has no selector" for bare in _BARE_INTURN.finditer(_QUOTED.sub('""', expr))]
    selectors = list(_SELECTOR.finditer(expr))
    for selector in selectors:
        name, matchers = selector["name"], selector["matchers"]
        component = inturn_component(name)
        if component is None:
            faults.append(f"{name}: not an inturn series")
            continue
        wanted = ['namespace="$namespace"', f'job="$release-{component}"', 'pod=~"$pod"']
        parts = name.split(":")
        family = re.sub(r"_(total|bucket|sum|count)$", "", parts[1] if len(parts) == 3 else name)
        if family in platform_labelled:
            wanted.append('platform=~"$platform"')
        have = {m.strip() for m in matchers.split(",")}
        faults.extend(f"{name} lacks {w}" for w in wanted if w not in have)
    return faults


def platform_labelled_families() -> set[str]:
    return {name for name, (_, labels) in exported_families().items() if "platform" in labels}


def test_the_dashboard_has_the_variables_of_the_mixins(monitored: list[Manifest]) -> None:
    (dashboard,) = dashboards(monitored)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert tuple(variables) == DASHBOARD_VARIABLES
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for position, name in enumerate(DASHBOARD_VARIABLES[1:], start=1):
        variable = variables[name]
        assert variable["type"] == "query"
        assert variable["datasource"] == _DATASOURCE
        query = variable["query"]["query"]
        used = set(re.findall(r"\$(\w+)", query))
        assert used <= set(DASHBOARD_VARIABLES[1:position]), f"{name} uses a variable resolved after it"
    assert "$namespace" in variables["release"]["query"]["query"]
    # The release is the jobs' common prefix: rel-inturn-worker -> rel-inturn.
    regex = variables["release"]["regex"].strip("/")
    assert [re.sub(regex, r"\1", job) for job in ("rel-inturn-worker", "a-b-webhook")] == ["rel-inturn", "a-b"]
    for name in ("pod", "platform"):
        assert variables[name]["multi"]
        assert variables[name]["includeAll"]
        assert variables[name]["allValue"] == ".*"


def test_every_dashboard_panel_is_filtered_by_every_variable(monitored: list[Manifest]) -> None:
    platform_labelled = platform_labelled_families()
    assert {"inturn_worker_dispatched", "inturn_worker_ack_latency_seconds", "inturn_webhook_statuses"} <= (
        platform_labelled
    )
    (dashboard,) = dashboards(monitored)
    targets = 0
    for panel in panels_of(dashboard):
        assert panel["datasource"] == _DATASOURCE, panel["title"]
        for target in panel["targets"]:
            targets += 1
            assert target["datasource"] == _DATASOURCE, panel["title"]
            assert filter_faults(target["expr"], platform_labelled) == [], panel["title"]
    assert targets >= 30


def test_the_filter_check_finds_a_missing_variable() -> None:
    platform = {"inturn_worker_dispatched"}
    good = (
        'sum(ns_job:inturn_worker_dispatched:rate5m{namespace="$namespace", job="$release-worker", pod=~"$pod", '
        'platform=~"$platform"})'
    )
    assert filter_faults(good, platform) == []
    assert filter_faults(good.replace(', platform=~"$platform"', ""), platform) == [
        'ns_job:inturn_worker_dispatched:rate5m lacks platform=~"$platform"'
    ]
    assert filter_faults('sum(inturn_bridge_in_flight{namespace="$namespace"})', platform) == [
        'inturn_bridge_in_flight lacks job="$release-bridge"',
        'inturn_bridge_in_flight lacks pod=~"$pod"',
    ]
    assert filter_faults("sum(inturn_worker_active_rooms)", platform) == ["inturn_worker_active_rooms has no selector"]
