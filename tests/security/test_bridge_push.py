"""The bridge's push endpoint as a hostile client meets it: a real bridge, real Kafka, ID tokens signed by a key made
here whose certificates a loopback server serves (``tests.bridge.oidc_issuer``; Google's own cannot be had offline).

What it pins: in production, push mode needs an OIDC audience and the pushing service account, or a loudly named
opt-out; every token that does not prove the sender gets 401 and nothing of its request reaches Kafka; the push port
serves ``POST /push`` and nothing else, the probes and metrics answer on the internal port.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
from google.auth import crypt
from structlog.testing import capture_logs

import inturn_bridge.service
from inturn import topics
from inturn.errors import ConfigError
from inturn.kafka import make_admin
from inturn.schemas import Message, decode, encode
from inturn.settings import KafkaSettings, load
from inturn.settings.bridge import BridgeSettings
from inturn_bridge.service import BridgeService
from inturn_devtools.reading import TopicReader
from tests.bridge.conftest import workload
from tests.bridge.oidc_issuer import AUDIENCE, PUSHER, certificate_server, signing_key, token
from tests.bridge.test_push import envelope, post

pytestmark = pytest.mark.kafka


@pytest.fixture
def ready_topics(inturn_topics: KafkaSettings) -> KafkaSettings:
    """This test's topics, once the broker serves every partition of messages and dead letters."""
    topics.wait_visible(make_admin(inturn_topics), [inturn_topics.topic_messages, inturn_topics.topic_dlq])
    return inturn_topics


@pytest.fixture
async def issuer() -> AsyncIterator[tuple[str, crypt.RSASigner]]:
    """The loopback certificate endpoint's URL and the key that signs the tokens it vouches for."""
    async with certificate_server() as served:
        yield served


@pytest.fixture
def fresh_bridge_logger(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bridge's logger, not yet bound (loggers cache their processors on first use, past ``capture_logs``)."""
    monkeypatch.setattr(inturn_bridge.service, "log", structlog.get_logger("inturn.bridge"))


def push_settings(kafka: KafkaSettings, **overrides: Any) -> BridgeSettings:
    """A production push bridge on this test's topics, both HTTP servers on free loopback ports."""
    fields: dict[str, Any] = {
        **kafka.model_dump(exclude_unset=True),  # as set: production refuses even a 0 test clock
        "environment": "production",
        "bridge_mode": "push",
        "bridge_http_host": "127.0.0.1",
        "bridge_http_port": 0,
        "bridge_internal_port": 0,
        "bridge_kafka_delivery_timeout_ms": 5000,
    }
    fields.update(overrides)
    return load(BridgeSettings, **fields)


def test_a_production_push_bridge_without_audience_and_email_does_not_start(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTURN_")}
    env.update(INTURN_ENVIRONMENT="production", INTURN_BRIDGE_MODE="push")
    inturn = Path(sys.executable).parent / "inturn"
    started = subprocess.run([str(inturn), "bridge"], env=env, capture_output=True, text=True, timeout=60)
    assert started.returncode == 1, started.stderr
    assert "configuration error" in started.stderr
    assert "push mode in production needs INTURN_BRIDGE_OIDC_AUDIENCE and INTURN_BRIDGE_OIDC_EMAIL" in started.stderr
    assert "INTURN_BRIDGE_PUSH_ALLOW_UNAUTHENTICATED=true" in started.stderr


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        ({"bridge_oidc_audience": AUDIENCE}, "INTURN_BRIDGE_OIDC_EMAIL"),
        ({"bridge_oidc_email": PUSHER}, "INTURN_BRIDGE_OIDC_AUDIENCE"),
        ({"bridge_oidc_audience": "  ", "bridge_oidc_email": PUSHER}, "INTURN_BRIDGE_OIDC_AUDIENCE"),
    ],
)
def test_production_push_mode_with_only_one_of_audience_and_email_is_refused_naming_the_other(
    given: dict[str, str], missing: str
) -> None:
    with pytest.raises(ConfigError, match=f"push mode in production needs {missing}:"):
        load(BridgeSettings, environment="production", bridge_mode="push", **given)
    # The same settings are fine where push is not served, or outside production.
    assert load(BridgeSettings, environment="production", bridge_mode="pull", **given).bridge_mode == "pull"
    assert load(BridgeSettings, environment="test", bridge_mode="push", **given).bridge_mode == "push"


async def test_in_production_push_takes_only_a_token_of_the_audience_and_account_and_nothing_else_reaches_kafka(
    ready_topics: KafkaSettings, issuer: tuple[str, crypt.RSASigner], test_id: str
) -> None:
    certs_url, signer = issuer
    settings = push_settings(
        ready_topics, bridge_oidc_audience=AUDIENCE, bridge_oidc_email=PUSHER, bridge_oidc_certs_url=certs_url
    )
    stranger, _ = signing_key("kid-1")  # the same key id, another key: a forgery
    now = int(time.time())
    hostile: dict[str, str | None] = {
        "no token": None,
        "another service account": token(signer, email="attacker@other-project.iam.gserviceaccount.com"),
        "an unverified email": token(signer, email_verified=False),
        "another audience": token(signer, aud="https://attacker.example.com/push"),
        "expired": token(signer, iat=now - 7200, exp=now - 3600),
        "forged": token(stranger),
    }
    # One room for every request: all land on one partition, in the order sent, so a rejected one that had been
    # written would sit before the accepted one.
    messages = workload(rooms=1, per_room=len(hostile) + 1, run_id=test_id)
    bridge = BridgeService(settings)
    await bridge.start()
    reader = TopicReader(ready_topics, ready_topics.topic_messages)
    answers: dict[str, tuple[int, dict[str, Any]]] = {}
    try:
        for (case, bearer), message in zip(hostile.items(), messages, strict=False):
            body = envelope(encode(message), f"{test_id}-{case}", ordering_key=message.room_id)
            answers[case] = await post(bridge.port, body, bearer)
        accepted_message = messages[-1]
        body = envelope(encode(accepted_message), f"{test_id}-valid", ordering_key=accepted_message.room_id)
        accepted = await post(bridge.port, body, token(signer))
        reader.until(lambda r: len(r) >= 1, 10, "the accepted message")
        reader.poll(0.5)  # a late write of a rejected one would show up here too
    finally:
        reader.close()
        await bridge.stop()
    for case, (status, answer) in answers.items():
        assert (case, status, answer["status"]) == (case, 401, "rejected")
    assert answers["another service account"][1]["reason"] == (
        f"token email 'attacker@other-project.iam.gserviceaccount.com' is not '{PUSHER}', or not verified"
    )
    assert answers["another audience"][1]["reason"].startswith("invalid token")
    assert accepted[0] == 200
    assert accepted[1]["status"] == "written"
    assert [decode(Message, r.value).message_id for r in reader.records] == [accepted_message.message_id]


async def test_the_push_port_serves_only_post_push_and_the_probes_answer_on_the_internal_port(
    ready_topics: KafkaSettings, issuer: tuple[str, crypt.RSASigner]
) -> None:
    certs_url, _ = issuer
    settings = push_settings(
        ready_topics, bridge_oidc_audience=AUDIENCE, bridge_oidc_email=PUSHER, bridge_oidc_certs_url=certs_url
    )
    bridge = BridgeService(settings)
    await bridge.start()
    push: dict[str, int] = {}
    internal: dict[str, int] = {}
    try:
        async with aiohttp.ClientSession() as http:
            for path in ("/metrics", "/healthz", "/readyz", "/docs", "/openapi.json", "/"):
                async with http.get(f"http://127.0.0.1:{bridge.port}{path}") as resp:
                    push[f"GET {path}"] = resp.status
            async with http.get(f"http://127.0.0.1:{bridge.port}/push") as resp:
                push["GET /push"] = resp.status
            for path in ("/metrics", "/healthz", "/readyz"):
                async with http.get(f"http://127.0.0.1:{bridge.internal_port}{path}") as resp:
                    internal[f"GET {path}"] = resp.status
            async with http.post(f"http://127.0.0.1:{bridge.internal_port}/push", data=b"{}") as resp:
                internal["POST /push"] = resp.status
    finally:
        await bridge.stop()
    assert bridge.port != bridge.internal_port
    assert push == {
        "GET /metrics": 404,
        "GET /healthz": 404,
        "GET /readyz": 404,
        "GET /docs": 404,
        "GET /openapi.json": 404,
        "GET /": 404,
        "GET /push": 405,
    }
    assert internal == {"GET /metrics": 200, "GET /healthz": 200, "GET /readyz": 200, "POST /push": 404}


@pytest.mark.usefixtures("fresh_bridge_logger")
@pytest.mark.parametrize(
    ("environment", "opt_out"),
    [("production", True), ("development", False)],
    ids=["production-with-the-opt-out", "development"],
)
async def test_push_without_a_token_check_starts_only_with_the_opt_out_in_production_and_says_so_at_start(
    ready_topics: KafkaSettings, test_id: str, environment: str, opt_out: bool
) -> None:
    settings = push_settings(ready_topics, environment=environment, bridge_push_allow_unauthenticated=opt_out)
    (message,) = workload(rooms=1, per_room=1, run_id=test_id)
    with capture_logs() as logs:
        bridge = BridgeService(settings)
        await bridge.start()
        try:
            anyone = await post(bridge.port, envelope(encode(message), f"{test_id}-1", ordering_key=message.room_id))
        finally:
            await bridge.stop()
    [warning] = [e for e in logs if e["event"] == "bridge.push_unauthenticated"]
    assert warning["log_level"] == "warning"
    assert warning["environment"] == environment
    assert warning["opt_out"] == ("INTURN_BRIDGE_PUSH_ALLOW_UNAUTHENTICATED" if opt_out else None)
    assert "anyone who reaches the port" in warning["hint"]
    assert anyone[0] == 200  # open, as announced


@pytest.mark.usefixtures("fresh_bridge_logger")
async def test_an_audience_without_an_email_outside_production_warns_that_any_service_account_passes(
    ready_topics: KafkaSettings, issuer: tuple[str, crypt.RSASigner]
) -> None:
    certs_url, _ = issuer
    settings = push_settings(
        ready_topics, environment="development", bridge_oidc_audience=AUDIENCE, bridge_oidc_certs_url=certs_url
    )
    with capture_logs() as logs:
        bridge = BridgeService(settings)
        await bridge.start()
        await bridge.stop()
    [warning] = [e for e in logs if e["event"].startswith("bridge.push_")]
    assert (warning["event"], warning["log_level"]) == ("bridge.push_any_service_account", "warning")
    assert "INTURN_BRIDGE_OIDC_EMAIL" in warning["hint"]
