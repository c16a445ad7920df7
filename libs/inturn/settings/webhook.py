"""Settings of the ack webhook (``services/webhook``): environment variables ``INTURN_WEBHOOK_*``.

Secret lists (``INTURN_WEBHOOK_APP_SECRETS``, ``INTURN_WEBHOOK_GENERIC_SECRET``) take either a JSON
list (``["new","old"]``) or comma-separated values (``new,old``): every listed secret is accepted,
which is how a secret is rotated without dropping callbacks signed with the previous one.
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

from inturn.settings.common import ENV_PREFIX, KafkaSettings

SecretList = Annotated[list[SecretStr], NoDecode]


def _split_secrets(value: Any) -> Any:
    """A JSON list or comma-separated string as a list; lists pass through."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        return orjson.loads(text)
    return [part.strip() for part in text.split(",") if part.strip()]


class WebhookSettings(KafkaSettings):
    """How the webhook listens, which secrets it accepts, and how it maps statuses to rooms."""

    webhook_host: str = Field("0.0.0.0", description="Address uvicorn binds to.")  # noqa: S104 - a pod listens on all interfaces
    webhook_port: int = Field(8080, ge=1, le=65535, description="Port uvicorn binds to.")
    webhook_workers: int = Field(
        1, ge=1, description="uvicorn worker processes; each keeps its own replay window and /metrics."
    )
    webhook_app_secrets: SecretList = Field(
        default_factory=list,
        description="Meta app secrets accepted for X-Hub-Signature-256 (current first, then previous ones).",
    )
    webhook_verify_token: SecretStr = Field(
        SecretStr(""), description="Token Meta's GET verification handshake must present (hub.verify_token)."
    )
    webhook_generic_secret: SecretList = Field(
        default_factory=list,
        description="Secrets accepted for X-Inturn-Signature-256 on /webhooks/generic/{platform} (list: rotation).",
    )
    webhook_twilio_auth_tokens: SecretList = Field(
        default_factory=list,
        description="Twilio Auth Tokens accepted for X-Twilio-Signature (current first, then previous ones).",
    )
    webhook_public_base_url: str | None = Field(
        None,
        description="The webhook's public base URL as platforms call it (e.g. https://hooks.example.com): Twilio "
        "signs that URL. Unset: rebuilt from X-Forwarded-Proto/-Host (set by the proxy) or the request.",
    )
    webhook_internal_port: int = Field(
        9090,
        ge=1,
        le=65535,
        description="Port of /metrics, /healthz, /readyz and the OpenAPI document (/openapi.json, /docs, /redoc); "
        "never routed by an Ingress. The public port (INTURN_WEBHOOK_PORT) serves only the platform callbacks.",
    )
    webhook_max_body_bytes: int = Field(1024 * 1024, ge=1024, description="Largest request body accepted (413).")
    webhook_body_budget_bytes: int = Field(
        32 * 1024 * 1024,
        ge=64 * 1024,
        description="Bytes of request bodies held at once by the process (each callback reserves its "
        "Content-Length before it is read); past it new callbacks get 503 with Retry-After (docs/webhook.md).",
    )
    webhook_max_header_bytes: int = Field(
        16 * 1024,
        ge=1024,
        description="Largest request line plus headers accepted; past it the request gets 431 and the "
        "connection is closed.",
    )
    webhook_max_headers: int = Field(
        100, ge=8, description="Most header fields a request may carry (431 and the connection closed past it)."
    )
    webhook_header_timeout_s: float = Field(
        10.0,
        gt=0,
        description="A connection must deliver a request's line and headers within this many seconds of "
        "connecting (or of that request's first byte); else 408 and the connection is closed.",
    )
    webhook_body_timeout_s: float = Field(
        15.0,
        gt=0,
        description="A request's whole body must arrive within this many seconds of its headers; else the "
        "connection is closed.",
    )
    webhook_keepalive_timeout_s: int = Field(
        65,
        ge=1,
        description="An idle keep-alive connection is closed after this many seconds (above ingress-nginx's "
        "60-second upstream keep-alive, so that the proxy, not the webhook, closes first).",
    )
    webhook_kafka_confirm_timeout_ms: int = Field(
        5000, ge=1, description="How long a request waits for Kafka to confirm its acks before answering 503."
    )
    webhook_kafka_message_timeout_ms: int = Field(
        30000, ge=1000, description="librdkafka message.timeout.ms: how long an unconfirmed ack is retried."
    )
    webhook_kafka_linger_ms: int = Field(
        20,
        ge=0,
        description="librdkafka linger.ms: batching delay, paid once per request (at most this much on an ack's way "
        "to its worker); fewer, fuller produce requests, which the broker's CPU follows (docs/operations.md, "
        "Sizing; 10 before issue 42); at 2 ms librdkafka's broker thread cost about twice the CPU per status at the "
        "worker benchmark's rate.",
    )
    webhook_replay_window: int = Field(
        100_000,
        ge=0,
        description="(platform message id, status) pairs remembered per process to drop replays (0: off).",
    )
    webhook_statuses_split: bool = Field(
        True,
        description="Publish statuses that can no longer change a worker's outcome (later statuses of a message "
        "whose deciding status this process already had confirmed on the acks topic; every status of a platform "
        "whose send answer is the ack) to INTURN_TOPIC_STATUSES instead of the acks topic the workers read. Off: "
        "every status goes to the acks topic. Measured side by side in six pairs, it took on average 0.02 of the "
        "old configuration's broker CPU per delivered message and 0.03 of its worker CPU off, the webhook's moving "
        "no more than the box's noise (docs/operations.md, Sizing).",
    )
    webhook_decided_window: int = Field(
        100_000,
        ge=1,
        description="Messages (platform, platform message id) whose deciding status this process had confirmed on "
        "the acks topic, remembered (oldest decided first out) so that their later statuses go to the statuses "
        "topic; at most 400 bytes each with WhatsApp-sized ids (100,000: at most 40 MB). A message forgotten, or "
        "seen by another replica, has its later statuses on the acks topic, as with the split off.",
    )
    webhook_room_from_recipient: str | None = Field(
        None,
        description="Room of a status without inturn callback data: a template using {recipient} and "
        "{account} (e.g. 'wa:{recipient}'), or a JSON object mapping recipient to room. Unset: no fallback.",
    )
    webhook_ready_max_age_s: float = Field(
        15.0, gt=0, description="/readyz fails when Kafka last answered longer ago than this."
    )
    webhook_probe_interval_s: float = Field(5.0, gt=0, description="How often Kafka's metadata is probed.")

    @field_validator("webhook_app_secrets", "webhook_generic_secret", "webhook_twilio_auth_tokens", mode="before")
    @classmethod
    def _secret_list(cls, value: Any) -> Any:
        return _split_secrets(value)

    @field_validator("webhook_room_from_recipient")
    @classmethod
    def _room_mapping(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if value.lstrip().startswith("{") and value.rstrip().endswith("}") and '"' in value:
            mapping = orjson.loads(value)
            if not isinstance(mapping, dict) or not all(isinstance(v, str) and v for v in mapping.values()):
                raise ValueError("a JSON mapping must be an object of recipient -> non-empty room id")
        elif "{recipient}" not in value:
            raise ValueError("a template must use {recipient}, e.g. 'wa:{recipient}'")
        return value

    @model_validator(mode="after")
    def _ports_and_budget(self) -> WebhookSettings:
        if self.webhook_internal_port == self.webhook_port:
            raise ValueError(
                f"{ENV_PREFIX}WEBHOOK_INTERNAL_PORT must differ from {ENV_PREFIX}WEBHOOK_PORT: the internal port's "
                "metrics, probes and documents must not be served where the callbacks are"
            )
        if self.webhook_body_budget_bytes < self.webhook_max_body_bytes:
            raise ValueError(
                f"{ENV_PREFIX}WEBHOOK_BODY_BUDGET_BYTES ({self.webhook_body_budget_bytes}) is below "
                f"{ENV_PREFIX}WEBHOOK_MAX_BODY_BYTES ({self.webhook_max_body_bytes}): a body of the largest size "
                "accepted would never fit"
            )
        return self

    @model_validator(mode="after")
    def _secrets_in_production(self) -> WebhookSettings:
        if self.environment != "production":
            return self
        if not self.webhook_app_secrets:
            raise ValueError(f"{ENV_PREFIX}WEBHOOK_APP_SECRETS is empty: every callback would be refused")
        return self  # placeholders, in these lists too, are refused by InturnSettings
