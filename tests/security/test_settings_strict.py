"""Nothing silently ignored: an ``INTURN_*`` variable no component knows stops every service, naming the closest
known one; a sibling component's variable does not; in production a placeholder credential stops every service."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_settings import BaseSettings

import inturn.settings
from inturn.errors import ConfigError
from inturn.settings import load
from inturn.settings.bridge import BridgeSettings
from inturn.settings.common import (
    OTHER_VARIABLES,
    OUTSIDE_FIELDS,
    SETTINGS_CLASSES,
    InturnSettings,
    KafkaSettings,
    known_variables,
)
from inturn.settings.operator import OperatorSettings
from inturn.settings.sim import SimSettings
from inturn.settings.webhook import WebhookSettings
from inturn.settings.worker import WorkerSettings
from inturn_reports.settings import ReportSettings
from tests.support.env import set_env

ROOT = Path(__file__).resolve().parents[2]

#: Every service's settings class, as its process loads it.
SERVICES: list[type[BaseSettings]] = [
    WorkerSettings,
    WebhookSettings,
    BridgeSettings,
    SimSettings,
    OperatorSettings,
    ReportSettings,
    KafkaSettings,  # inturn topics
]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No ``INTURN_*`` variable of the test session's own (the shared services' addresses) in the environment."""
    for name in list(os.environ):
        if name.upper().startswith("INTURN_"):
            monkeypatch.delenv(name)
    return monkeypatch


@pytest.mark.parametrize("cls", SERVICES, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("INTURN_WORKER_ACK_TIMOUT_MS", "INTURN_WORKER_ACK_TIMEOUT_MS"),
        ("INTURN_KAFKA_BOOTSTRAPS", "INTURN_KAFKA_BOOTSTRAP"),
        ("INTURN_WEBHOOK_APP_SECRET", "INTURN_WEBHOOK_APP_SECRETS"),
        ("inturn_bridge_oidc_audiance", "INTURN_BRIDGE_OIDC_AUDIENCE"),
    ],
)
def test_a_misspelt_variable_stops_every_service_naming_the_right_one(
    clean_env: pytest.MonkeyPatch, cls: type[BaseSettings], typo: str, meant: str
) -> None:
    clean_env.setenv(typo, "5000")
    with pytest.raises(ConfigError) as refused:
        load(cls)
    assert f"{typo} is not a setting of any inturn component (did you mean {meant}?)" in str(refused.value)


def test_a_variable_like_no_known_one_is_refused_pointing_at_the_reference(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("INTURN_FROBNICATE", "1")
    with pytest.raises(ConfigError, match=r"INTURN_FROBNICATE is not a setting of any inturn component \(see docs/"):
        load(KafkaSettings)


@pytest.mark.parametrize("cls", SERVICES, ids=lambda c: c.__name__)
def test_a_sibling_components_variables_from_a_shared_env_file_are_fine(
    clean_env: pytest.MonkeyPatch, cls: type[BaseSettings]
) -> None:
    shared = {
        "INTURN_WEBHOOK_PORT": "8080",
        "INTURN_WORKER_ACK_TIMEOUT_MS": "8000",
        "INTURN_BRIDGE_MODE": "pull",
        "INTURN_SIM_PORT": "8089",
        "INTURN_REPORT_TOP_N": "5",
        "INTURN_WHATSAPP_BASE_URL": "http://127.0.0.1:8089",
        "INTURN_CACHE_DIR": "/opt/inturn/cache",
    }
    set_env(clean_env, shared)
    assert isinstance(load(cls), cls)


def test_the_service_links_kubernetes_sets_for_a_release_named_inturn_are_not_taken_for_typos(
    clean_env: pytest.MonkeyPatch,
) -> None:
    # What a pod sees for the Service inturn-webhook (port 8080 named http) with enableServiceLinks left on.
    links = {
        "INTURN_WEBHOOK_SERVICE_HOST": "10.96.0.7",
        "INTURN_WEBHOOK_SERVICE_PORT": "8080",
        "INTURN_WEBHOOK_SERVICE_PORT_HTTP": "8080",
        "INTURN_WORKER_PORT": "tcp://10.96.0.8:8081",
        "INTURN_WEBHOOK_PORT_8080_TCP": "tcp://10.96.0.7:8080",
        "INTURN_WEBHOOK_PORT_8080_TCP_PROTO": "tcp",
        "INTURN_WEBHOOK_PORT_8080_TCP_PORT": "8080",
        "INTURN_WEBHOOK_PORT_8080_TCP_ADDR": "10.96.0.7",
    }
    set_env(clean_env, links)
    assert isinstance(load(WorkerSettings), WorkerSettings)
    # A misspelt port setting is still one, whatever its name ends with.
    clean_env.setenv("INTURN_WORKR_HTTP_PORT", "8081")
    with pytest.raises(ConfigError, match="did you mean INTURN_WORKER_HTTP_PORT"):
        load(WorkerSettings)


def test_the_real_worker_refuses_to_start_on_a_misspelt_variable() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTURN_")}
    env["INTURN_WORKER_ACK_TIMOUT_MS"] = "5000"
    inturn = Path(sys.executable).parent / "inturn"
    started = subprocess.run([str(inturn), "worker"], env=env, capture_output=True, text=True, timeout=60)
    assert started.returncode == 1
    assert "did you mean INTURN_WORKER_ACK_TIMEOUT_MS?" in started.stderr


# --- the list of known variables stays honest -----------------------------------------------------------------------


def test_the_known_settings_classes_are_every_settings_class_of_the_package() -> None:
    found = set()
    for module in pkgutil.iter_modules(inturn.settings.__path__):
        loaded = importlib.import_module(f"inturn.settings.{module.name}")
        for _, obj in inspect.getmembers(loaded, inspect.isclass):
            if issubclass(obj, InturnSettings) and obj.__module__ == loaded.__name__:
                found.add(obj)
    listed = {importlib.import_module(p.split(":")[0]).__dict__[p.split(":")[1]] for p in SETTINGS_CLASSES}
    # Each class found is listed, or its fields are all within a listed class's (a base such as PlatformSettings).
    for cls in found - listed:
        assert any(set(cls.model_fields) <= set(other.model_fields) for other in listed), cls


def test_the_reports_fields_kept_in_libs_are_the_report_settings_own() -> None:
    own = set(ReportSettings.model_fields) - set(KafkaSettings.model_fields)
    assert set(OUTSIDE_FIELDS["inturn_reports.settings:ReportSettings"]) == own


def _names_in_use() -> set[str]:
    """Every INTURN_* name the repository's files mention (code, tests, devtools, Makefile, chart, docs, image)."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    names: set[str] = set()
    for path in listed.splitlines():
        try:
            text = (ROOT / path).read_text()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        names |= set(re.findall(r"\bINTURN_[A-Z0-9_]*[A-Z0-9]\b", text))
    return names


#: Names that are no setting on purpose: misspelt by the tests that show they are refused, or Kubernetes' service
#: links (add yours here).
NOT_SETTINGS_ON_PURPOSE = frozenset(
    {
        "INTURN_WORKER_ACK_TIMOUT_MS",
        "INTURN_KAFKA_BOOTSTRAPS",
        "INTURN_WEBHOOK_APP_SECRET",
        "INTURN_FROBNICATE",
        "INTURN_WORKR_HTTP_PORT",
        "INTURN_WORKER_PORT",
        "INTURN_WEBHOOK_SERVICE_HOST",
        "INTURN_WEBHOOK_SERVICE_PORT",
        "INTURN_WEBHOOK_SERVICE_PORT_HTTP",
        "INTURN_WEBHOOK_PORT_8080_TCP",
        "INTURN_WEBHOOK_PORT_8080_TCP_PROTO",
        "INTURN_WEBHOOK_PORT_8080_TCP_PORT",
        "INTURN_WEBHOOK_PORT_8080_TCP_ADDR",
    }
)


def test_every_inturn_variable_the_repository_uses_is_a_known_one() -> None:
    used = _names_in_use()
    assert "INTURN_KAFKA_BOOTSTRAP" in used  # the scan reads what it should
    # Prefixes written out in prose (``INTURN_KAFKA_*``) end in '_' and are not names.
    assert sorted(used - known_variables() - NOT_SETTINGS_ON_PURPOSE) == []


def test_variables_read_outside_the_settings_classes_are_not_settings() -> None:
    settings_names = known_variables() - set(OTHER_VARIABLES)
    assert not set(OTHER_VARIABLES) & settings_names


# --- placeholder credentials ----------------------------------------------------------------------------------------

#: What each service needs to start in production, with real-looking credentials.
REAL: dict[type[BaseSettings], dict[str, Any]] = {
    WorkerSettings: {
        "whatsapp_access_token": "EAAG-real-whatsapp",
        "generic_token": "real-generic-7f3a",
        "messenger_page_access_token": "EAAG-real-messenger",
        "instagram_access_token": "IGQ-real-instagram",
        "twilio_auth_token": "9f8e7d6c5b4a",
        "telegram_bot_token": "123456:ABC-real",
        "worker_room_api_token": "room-api-5b1c",
        "postgres_password": "pg-real-91ad",
    },
    WebhookSettings: {
        "webhook_app_secrets": "meta-app-secret-1",
        "webhook_verify_token": "verify-3e2d",
        "webhook_generic_secret": "generic-hmac-4c5d",
        "webhook_twilio_auth_tokens": "twilio-6e7f",
    },
    SimSettings: {
        "sim_app_secret": "sim-secret-1a2b",
        "sim_access_token": "sim-token-3c4d",
        "sim_twilio_auth_token": "x9",
    },
    OperatorSettings: {"postgres_password": "pg-real-91ad", "worker_room_api_token": "room-api-5b1c"},
    ReportSettings: {"report_jdbc_password": "jdbc-real-77aa"},
    BridgeSettings: {},
}

#: (settings class, credential, placeholder) for every credential of every service.
CASES = [
    (cls, name, placeholder)
    for cls, real in REAL.items()
    for name in real
    for placeholder in ("dev-token", "changeme", " Secret ")
]


@pytest.mark.parametrize("cls", list(REAL), ids=lambda c: c.__name__)
def test_with_real_credentials_every_service_starts_in_production(
    clean_env: pytest.MonkeyPatch, cls: type[BaseSettings]
) -> None:
    assert load(cls, environment="production", **REAL[cls]).environment == "production"  # type: ignore[attr-defined]  # every class here is an InturnSettings


@pytest.mark.parametrize(
    ("cls", "name", "placeholder"), CASES, ids=[f"{c.__name__}-{n}-{p.strip()}" for c, n, p in CASES]
)
def test_in_production_a_placeholder_credential_stops_the_service_naming_the_variable(
    clean_env: pytest.MonkeyPatch, cls: type[BaseSettings], name: str, placeholder: str
) -> None:
    clean_env.setenv("INTURN_ENVIRONMENT", "production")
    clean_env.setenv(f"INTURN_{name.upper()}", placeholder)
    others = {k: v for k, v in REAL[cls].items() if k != name}
    with pytest.raises(ConfigError, match=f"INTURN_{name.upper()}: placeholder secret; set a real one in production"):
        load(cls, **others)
    clean_env.setenv("INTURN_ENVIRONMENT", "development")
    assert isinstance(load(cls, **others), cls)  # outside production a placeholder is a convenience


def test_a_production_worker_needs_some_platform_credential_and_names_the_ones_left_unset(
    clean_env: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(
        ConfigError, match=r"no platform credential is set .*: in production the worker could send nowhere"
    ):
        load(WorkerSettings, environment="production")
    clean_env.setenv("INTURN_TELEGRAM_BOT_TOKEN", "123456:ABC-real")
    worker = load(WorkerSettings, environment="production")
    assert worker.platforms_without_credentials() == [
        "INTURN_GENERIC_TOKEN",
        "INTURN_INSTAGRAM_ACCESS_TOKEN",
        "INTURN_MESSENGER_PAGE_ACCESS_TOKEN",
        "INTURN_TWILIO_AUTH_TOKEN",
        "INTURN_WHATSAPP_ACCESS_TOKEN",
    ]
    assert load(WorkerSettings, environment="development").platforms_without_credentials() == []


def test_a_placeholder_among_rotated_secrets_is_refused_too(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="INTURN_WEBHOOK_APP_SECRETS: placeholder secret"):
        load(
            WebhookSettings,
            environment="production",
            **{**REAL[WebhookSettings], "webhook_app_secrets": "new-real-secret,changeme"},
        )
