"""Settings of the Pub/Sub bridge (``INTURN_BRIDGE_*`` plus the Kafka settings it extends).

The Pub/Sub client itself finds the emulator through ``PUBSUB_EMULATOR_HOST`` and real GCP
through Application Default Credentials; neither is an inturn setting.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

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
        description="Address of the HTTP server (push endpoint, /metrics, /healthz, /readyz).",
    )
    bridge_http_port: int = Field(8082, ge=0, le=65535, description="Port of the HTTP server (0: any free port).")
    bridge_push_path: str = Field("/push", pattern=r"^/", description="Path of the push endpoint (push mode).")
    bridge_oidc_audience: str | None = Field(
        None,
        description="When set, push requests must carry a Google-signed OIDC token for this audience "
        "(Authorization: Bearer ...); 401 without a valid one.",
    )
    bridge_oidc_issuers: list[str] = Field(
        default_factory=lambda: ["https://accounts.google.com", "accounts.google.com"],
        description="Accepted 'iss' claims of push tokens (403 otherwise).",
    )
    bridge_oidc_email: str | None = Field(
        None, description="When set, the push token's verified 'email' must be this service account (403 otherwise)."
    )
    bridge_oidc_certs_url: str = Field(GOOGLE_CERTS_URL, description="Where the token signing certificates are.")

    @model_validator(mode="after")
    def _subscription_is_an_id(self) -> BridgeSettings:
        if "/" in self.bridge_subscription:
            raise ValueError(
                "INTURN_BRIDGE_SUBSCRIPTION is the subscription id, not its path; put the project in "
                "INTURN_BRIDGE_PROJECT"
            )
        return self
