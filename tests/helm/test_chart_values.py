"""values.yaml documents every key and points editors at the schema; the schema refuses what it does not know."""

from __future__ import annotations

import re

import pytest

from tests.helm.chart import CHART, Helm

pytestmark = [pytest.mark.helm, pytest.mark.timeout(1800)]

_BLOCK_KEY = re.compile(r"^\s*[A-Za-z0-9_.\-/]+:(\s|$)")


def undocumented_keys(text: str) -> list[str]:
    """Block-style keys of a values file without a comment line right above them (flow maps count as one key)."""
    missing = []
    previous = ""
    for number, line in enumerate(text.splitlines(), start=1):
        if _BLOCK_KEY.match(line) and not previous.lstrip().startswith("#"):
            missing.append(f"{number}: {line.strip()}")
        if line.strip():
            previous = line
    return missing


def test_every_key_of_values_yaml_has_a_comment_above_it() -> None:
    assert undocumented_keys((CHART / "values.yaml").read_text()) == []


def test_the_comment_check_finds_an_undocumented_key() -> None:
    assert undocumented_keys("# -- documented\na: 1\nb:\n  # -- c\n  c: 2\n") == ["3: b:"]


def test_values_yaml_starts_with_the_schema_modeline() -> None:
    first = (CHART / "values.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=values.schema.json"


@pytest.mark.parametrize(
    "values",
    [
        {"wroker": {"replicas": 2}},
        {"worker": {"replicaz": 2}},
        {"securityContext": {"runAsNonRoot": False}},
        {"bridge": {"mode": "poll"}},
    ],
    ids=["unknown-top-level-key", "unknown-component-key", "root", "bad-enum"],
)
def test_the_schema_refuses_unknown_keys_and_unsafe_values(helm: Helm, values: dict[str, object]) -> None:
    result = helm.template_text(values)
    assert result.returncode != 0
    assert "schema" in result.stderr


def test_a_config_key_that_is_not_a_settings_field_name_is_refused(helm: Helm) -> None:
    # The environment name's spelling is not the field name; the chart's own check names the field.
    result = helm.template_text({"worker": {"config": {"Worker-Mode": "ack"}}})
    assert result.returncode != 0
    assert "worker.config.Worker-Mode is not a setting of the worker (did you mean worker_mode?)" in result.stderr
