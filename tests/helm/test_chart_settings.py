"""What the chart puts in each component's environment is what that component's settings class reads."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from pydantic_settings import BaseSettings

from inturn.settings import ENV_PREFIX, KafkaSettings, load
from inturn.settings.bridge import BridgeSettings
from inturn.settings.webhook import WebhookSettings
from inturn.settings.worker import WorkerSettings
from tests.helm.chart import CHART, CI_VALUES, Helm, Manifest, containers, named, of_kind

try:  # the report's settings move to libs/inturn/settings/report.py by convention; until then they are here
    from inturn.settings.report import ReportSettings  # type: ignore[import-not-found,unused-ignore]  # another branch's module
except ImportError:
    from inturn_reports.settings import ReportSettings

pytestmark = [pytest.mark.helm, pytest.mark.timeout(1800)]

SCENARIOS = [pytest.param((), id="default"), *(pytest.param((f,), id=f.stem) for f in CI_VALUES)]

#: The settings class each component's ConfigMap feeds.
SETTINGS: dict[str, type[BaseSettings]] = {
    "worker": WorkerSettings,
    "webhook": WebhookSettings,
    "bridge": BridgeSettings,
    "report": ReportSettings,
}

#: Real-looking secrets (production refuses placeholders) for the settings check below.
SECRETS = {
    "INTURN_POSTGRES_PASSWORD": "pg-3f9a0c7d",
    "INTURN_WHATSAPP_ACCESS_TOKEN": "wa-81be22f0",
    "INTURN_GENERIC_TOKEN": "gen-55d0a1b9",
    "INTURN_WEBHOOK_APP_SECRETS": '["app-2c4e6a8b"]',
    "INTURN_WEBHOOK_VERIFY_TOKEN": "verify-7d9f1b3c",
    "INTURN_REPORT_JDBC_PASSWORD": "jdbc-64a2c0e8",
}


#: Settings the contract between the chart and the services names (docs/security.md: the internal ports, the
#: unauthenticated-push opt-out, the room API's token), accepted here even before a settings class declares them,
#: so that the chart and the services can land in either order.
CONTRACT_FIELDS: dict[type[BaseSettings], set[str]] = {
    WebhookSettings: {"webhook_internal_port"},
    BridgeSettings: {"bridge_internal_port", "bridge_push_allow_unauthenticated"},
    WorkerSettings: {"worker_room_api_token"},
}


def env_names(cls: type[BaseSettings]) -> set[str]:
    """The INTURN_* variables ``cls`` reads."""
    return {f"{ENV_PREFIX}{field.upper()}" for field in {*cls.model_fields, *CONTRACT_FIELDS.get(cls, set())}}


def component_configmaps(manifests: list[Manifest]) -> dict[str, dict[str, str]]:
    """ConfigMap data by component, for the components that read settings."""
    found = {}
    for configmap in of_kind(manifests, "ConfigMap"):
        component = configmap["metadata"]["labels"].get("app.kubernetes.io/component")
        if component in SETTINGS and configmap["metadata"]["name"].endswith(f"-{component}"):
            found[component] = configmap["data"]
    return found


@pytest.mark.parametrize("files", SCENARIOS)
def test_every_rendered_variable_is_a_setting_of_its_component(helm: Helm, files: tuple[Path, ...]) -> None:
    # pydantic-settings ignores unknown variables, so a misspelt key in values.yaml would silently do nothing.
    configmaps = component_configmaps(helm.render(files=files))
    assert configmaps
    for component, data in configmaps.items():
        unknown = set(data) - env_names(SETTINGS[component])
        assert unknown == set(), f"{component}: {sorted(unknown)} are not fields of {SETTINGS[component].__name__}"


def test_the_topics_hook_sets_only_kafka_settings(helm: Helm, default_manifests: list[Manifest]) -> None:
    hook = named(default_manifests, "Job", "-topics")
    env = {e["name"] for e in hook["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env - env_names(KafkaSettings) == set()


@pytest.mark.parametrize("component", sorted(SETTINGS))
def test_the_rendered_environment_is_accepted_by_the_settings_class(
    helm: Helm, component: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The default values run in production mode: this also proves no placeholder or malformed value is rendered.
    data = component_configmaps(helm.render(files=(CHART / "ci" / "full-values.yaml",)))[component]
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    for name, value in {**data, **SECRETS}.items():
        monkeypatch.setenv(name, value)
    settings = load(SETTINGS[component]).model_dump()
    assert settings["environment"] == "production"
    assert settings["topic_partitions"] == 24


@pytest.mark.parametrize("files", SCENARIOS)
def test_every_inturn_command_the_chart_runs_is_one_the_cli_parses(helm: Helm, files: tuple[Path, ...]) -> None:
    from inturn_cli.main import build_parser

    parser = build_parser()
    commands = []
    for manifest in helm.render(files=files):
        for container in containers(manifest):
            if container.get("command") == ["inturn"]:
                commands.append(container["args"])
    assert commands
    for args in commands:
        try:
            parsed = parser.parse_args(args)
        except SystemExit as exc:  # argparse exits on an unknown subcommand or flag
            raise AssertionError(f"`inturn {' '.join(args)}` is not a command the CLI knows") from exc
        assert callable(parsed.handler)


def secret_fields(cls: type[BaseSettings]) -> set[str]:
    """The settings fields of ``cls`` that hold a SecretStr (alone, optional or in a list)."""
    return {name for name, field in cls.model_fields.items() if "SecretStr" in str(field.annotation)}


def test_every_secret_setting_of_a_deployed_service_is_wired_from_a_secret() -> None:
    # A new SecretStr field in a service's settings must get a secrets.items entry (and so a secretKeyRef),
    # or operators would be left to put it in a ConfigMap.
    items = yaml.safe_load((CHART / "values.yaml").read_text())["secrets"]["items"]
    wired = {item["field"]: set(item["components"]) for item in items.values()}
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]
    maps = [schema["config"], *(schema[c]["properties"]["config"] for c in SETTINGS)]
    # The chart refuses a config key that files/settings.json does not list (inturn.validateConfigKeys).
    known = json.loads((CHART / "files" / "settings.json").read_text())
    assert set(known) == {"config", *(f"{c}.config" for c in SETTINGS)}
    for component, cls in SETTINGS.items():
        for field in secret_fields(cls):
            assert field in wired, f"{cls.__name__}.{field} is a secret with no secrets.items entry"
            assert component in wired[field], f"{field} does not reach the {component}"
            for where, keys in known.items():
                assert field not in keys, f"the chart allows {field} in {where}"
            for typed in maps:
                assert field not in typed["properties"], f"the values schema types {field} in a config map"
