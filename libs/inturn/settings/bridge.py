"""Settings of the Pub/Sub bridge (``INTURN_BRIDGE_*`` plus the Kafka settings it extends).

The Pub/Sub client itself finds the emulator through ``PUBSUB_EMULATOR_HOST`` and real GCP
through Application Default Credentials; neither is an inturn setting.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from inturn.settings.common import KafkaSettings

GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v1/certs"
#: The Pub/Sub topic the chat backend publishes to, unless told otherwise (``inturn pubsub setup --topic``). Here and
#: not beside ``ensure``: the CLI names it in its help, and every ``inturn`` process (the worker too) builds that help.
DEFAULT_TOPIC = "inturn-messages"


class BridgeSettings(KafkaSettings):
    """What the bridge reads, how much it holds at once, and how it answers push requests."""

    bridge_mode: Literal["pull", "push"] = Field(
        "pull", description="pull: streaming pull from a subscription; push: HTTP endpoint for push subscriptions."
    )
    bridge_project: str = Field("inturn-local", min_length=1, description="GCP project of the subscription.")
    bridge_subscription: str = Field(
        "inturn-messages-bridge",
        min_length=1,
        description="Subscription id (pull mode); it must have message ordering enabled.",
    )
    bridge_room_attribute: str | None = Field(
        None,
        description="When set, the room is this attribute and the Message is built from attributes + data "
        "(see docs/bridge.md); when unset, the room is the ordering key and data is a Message as JSON.",
    )
    bridge_max_messages: int = Field(
        1000, ge=1, description="Flow control: Pub/Sub messages leased and not yet acked/nacked, at most."
    )
    bridge_max_bytes: int = Field(
        100 * 1024 * 1024, ge=1024, description="Flow control: bytes of leased Pub/Sub messages, at most."
    )
    bridge_max_message_bytes: int = Field(
        256 * 1024,
        ge=1,
        description="Message data larger than this is dead-lettered (keep it below ~0.7 x the topics' "
        "max.message.bytes: the dead letter carries the data base64-encoded).",
    )
    bridge_dedupe_window: int = Field(
        100_000, ge=0, description="Pub/Sub message ids remembered to recognise redeliveries (0: off)."
    )
    bridge_replay_timeout_s: float = Field(
        60.0,
        gt=0,
        description="After a failed write, a room's messages are written only in the order they arrived, "
        "starting with the failed one; if that one does not come back within this time, the room moves on.",
    )
    bridge_kafka_delivery_timeout_ms: int = Field(
        30_000, ge=1000, description="How long Kafka may take to confirm a write before it counts as failed."
    )
    bridge_shutdown_timeout_s: float = Field(
        30.0, gt=0, description="On SIGTERM: how long to wait for outstanding Kafka confirmations."
    )
    bridge_http_host: str = Field(
        "0.0.0.0",  # noqa: S104 - a container's probes and Pub/Sub push reach the pod from outside
        description="Address of both HTTP servers (the push endpoint's and the internal one).",
    )
    bridge_http_port: int = Field(
        8082, ge=0, le=65535, description="Port of the push endpoint, push mode only: POST /push and nothing else."
    )
    bridge_internal_port: int = Field(
        9091,
        ge=0,
        le=65535,
        description="Port of /metrics, /healthz and /readyz (both modes); never routed by an Ingress.",
    )
    bridge_push_path: str = Field("/push", pattern=r"^/", description="Path of the push endpoint (push mode).")
    bridge_oidc_audience: str | None = Field(
        None,
        description="Push requests must carry a Google-signed OIDC token for this audience "
        "(Authorization: Bearer ...); 401 without a valid one. Required in production push mode.",
    )
    bridge_oidc_issuers: list[str] = Field(
        default_factory=lambda: ["https://accounts.google.com", "accounts.google.com"],
        description="Accepted 'iss' claims of push tokens (401 otherwise).",
    )
    bridge_oidc_email: str | None = Field(
        None,
        description="The push token's verified 'email' must be this service account (401 otherwise). "
        "Required in production push mode: without it a token of any service account passes.",
    )
    bridge_push_allow_unauthenticated: bool = Field(
        False,
        description="Opt-out for a private network: push mode in production without audience and email, taking "
        "POST /push from anyone who reaches the port (a warning is logged at start).",
    )
    bridge_oidc_certs_url: str = Field(GOOGLE_CERTS_URL, description="Where the token signing certificates are.")

    @field_validator("bridge_oidc_audience", "bridge_oidc_email")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @model_validator(mode="after")
    def _subscription_is_an_id(self) -> BridgeSettings:
        if "/" in self.bridge_subscription:
            raise ValueError(
                "INTURN_BRIDGE_SUBSCRIPTION is the subscription id, not its path; put the project in "
                "INTURN_BRIDGE_PROJECT"
            )
        return self

    @model_validator(mode="after")
    def _push_needs_proof(self) -> BridgeSettings:
        if self.environment != "production" or self.bridge_mode != "push" or self.bridge_push_allow_unauthenticated:
            return self
        missing = [
            f"INTURN_{name.upper()}"
            for name in ("bridge_oidc_audience", "bridge_oidc_email")
            if getattr(self, name) is None
        ]
        if missing:
            raise ValueError(
                f"push mode in production needs {' and '.join(missing)}: without them anyone who reaches the push "
                "port writes messages; set them, or INTURN_BRIDGE_PUSH_ALLOW_UNAUTHENTICATED=true on a private network"
            )
        return self

    def push_checks(self) -> Literal["audience+email", "audience", "none"]:
        """What push requests are checked for: a token of the audience and service account, of the audience by
        any account, or nothing."""
        if not self.bridge_oidc_audience:
            return "none"
        return "audience+email" if self.bridge_oidc_email else "audience"
