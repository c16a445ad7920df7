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


def inturn_names_in(promql: str) -> set[str]:
    """The inturn_* metric names a PromQL expression uses (label values in quotes are not names)."""
    return set(_INTURN_NAME.findall(_QUOTED.sub('""', promql)))


def alert_rules(manifests: list[Manifest]) -> list[dict[str, Any]]:
    """Every rule of the PrometheusRule."""
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
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$namespace": "inturn"}


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


def test_every_alert_expression_uses_only_exported_inturn_metrics(monitored: list[Manifest]) -> None:
    exported = exported_metric_names()
    used = set()
    for rule in alert_rules(monitored):
        names = inturn_names_in(rule["expr"])
        assert names <= exported, f"{rule['alert']} uses {sorted(names - exported)}, which no service exports"
        used |= names
    assert len(used) >= 10


def test_the_alerts_cover_lag_timeouts_dead_letters_stuck_rooms_and_breakers(monitored: list[Manifest]) -> None:
    alerts = {rule["alert"]: rule["expr"] for rule in alert_rules(monitored)}
    assert "inturn_worker_commit_lag_messages" in alerts["InturnConsumerLagHigh"]
    assert "kafka_consumergroup_lag" in alerts["InturnConsumerGroupLagHigh"]
    assert "inturn_worker_ack_timeouts_total" in alerts["InturnAckTimeoutRateHigh"]
    assert "inturn_worker_dead_letters_total" in alerts["InturnDeadLettersGrowing"]
    assert "inturn_worker_stuck_rooms" in alerts["InturnStuckRooms"]
    assert "inturn_worker_circuit_open" in alerts["InturnCircuitBreakerOpen"]
    # The selectors name the Services the ServiceMonitors scrape, so the alerts see this release's series only.
    assert 'job="rel-inturn-worker"' in alerts["InturnStuckRooms"]


def test_every_dashboard_query_uses_only_exported_inturn_metrics(monitored: list[Manifest]) -> None:
    exported = exported_metric_names()
    queries = dashboard_queries(monitored)
    assert len(queries) >= 15
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
