"""Schemathesis against the webhook's own OpenAPI document, every request signed: no server errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core.result import Ok
from schemathesis.python.asgi import shutdown_lifespans
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from inturn.settings.webhook import WebhookSettings
from inturn_webhook import create_app
from inturn_webhook.app import INTERNAL_PATHS
from inturn_webhook.signature import sign

from .support import APP_SECRET, GENERIC_SECRET

pytestmark = pytest.mark.kafka

SIGNATURES = {
    "/webhooks/whatsapp": ("X-Hub-Signature-256", APP_SECRET),
    "/webhooks/messenger": ("X-Hub-Signature-256", APP_SECRET),
    "/webhooks/instagram": ("X-Hub-Signature-256", APP_SECRET),
    "/webhooks/generic/": ("X-Inturn-Signature-256", GENERIC_SECRET),
}  # Twilio's requests go unsigned (its signature covers the URL the platform called): answered 401, never 5xx


def _wire_body(body: Any) -> bytes:
    """The bytes the transport would send for a generated body."""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body).encode()


def sign_requests(context: schemathesis.HookContext, case: schemathesis.Case[Any], kwargs: dict[str, Any]) -> None:
    """A ``before_call`` hook: send the generated body as exact bytes, signed as the platform would."""
    if case.method.upper() != "POST":
        return
    signing = next((v for path, v in SIGNATURES.items() if case.path.startswith(path)), None)
    body = b"" if isinstance(case.body, schemathesis.core.NotSet) else _wire_body(case.body)
    kwargs["data"] = body
    if signing is not None:
        header, secret = signing
        case.headers[header] = sign(body, secret.encode())


@pytest.fixture
def signing_hook() -> Iterator[None]:
    """The signing hook, registered for this test only (hooks are process-wide)."""
    schemathesis.hook("before_call")(sign_requests)
    try:
        yield
    finally:
        schemathesis.hooks.GLOBAL_HOOK_DISPATCHER.unregister(sign_requests)


def test_no_generated_request_gets_a_server_error(webhook_settings: WebhookSettings, signing_hook: None) -> None:
    # Schemathesis' Python API (its lazy pytest fixture loader does not run on this pytest).
    app = create_app(webhook_settings)
    _bound_arrays(app.openapi())  # FastAPI caches this document: /openapi.json serves the bounded one
    internal = webhook_settings.webhook_internal_port

    async def both_ports(scope: Any, receive: Any, send: Any) -> None:
        # One ASGI entry for schemathesis: the probes and the document as if on the internal port.
        if scope["type"] == "http" and scope["path"] in INTERNAL_PATHS:
            scope = {**scope, "server": ("testserver", internal)}
        await app(scope, receive, send)

    schema = schemathesis.openapi.from_asgi("/openapi.json", both_ports)
    operations = [result.ok() for result in schema.get_all_operations() if isinstance(result, Ok)]
    assert {op.path for op in operations} >= {
        "/webhooks/whatsapp",
        "/webhooks/messenger",
        "/webhooks/instagram",
        "/webhooks/twilio",
        "/webhooks/generic/{platform}",
        "/readyz",
    }
    try:
        for operation in operations:
            check_operation(operation)
    finally:
        shutdown_lifespans()  # the lifespan schemathesis started: closes the app's producer


def _bound_arrays(node: Any) -> None:
    """Give every array in the document ``maxItems: 3``, for generation only.

    Unbounded nested arrays (entry -> changes -> statuses) make Hypothesis spend tens of seconds
    per operation building examples; the many-statuses path is covered by the Kafka tests.
    """
    if isinstance(node, dict):
        if node.get("type") == "array":
            node["maxItems"] = 3
        for value in node.values():
            _bound_arrays(value)
    elif isinstance(node, list):
        for value in node:
            _bound_arrays(value)


def check_operation(operation: Any) -> None:
    """Generated requests (valid and invalid) for one operation, each answered without a server error."""
    documented = {str(code) for code in operation.definition.raw.get("responses", {})}

    # Valid requests and invalid ones (wrong types, missing fields): both must be answered, never with a 500.
    cases = st.one_of(operation.as_strategy(GenerationMode.POSITIVE), operation.as_strategy(GenerationMode.NEGATIVE))

    @given(case=cases)
    @settings(
        max_examples=25,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # a failure is reported as found: shrinking costs minutes here
        suppress_health_check=list(HealthCheck),
    )
    def generated(case: schemathesis.Case[Any]) -> None:
        response = case.call()
        # 503 is documented (Kafka did not confirm, or not ready yet): the platform retries. Nothing else 5xx.
        assert response.status_code < 500 or str(response.status_code) in documented, response.text
        case.validate_response(
            response, checks=[status_code_conformance, content_type_conformance, response_schema_conformance]
        )

    generated()
