"""Settings of the worker (``inturn worker``): ``INTURN_WORKER_*`` plus platform endpoints and credentials."""

from __future__ import annotations

import os
import socket
from typing import ClassVar, Literal

from pydantic import Field, PositiveFloat, SecretStr, model_validator

from inturn.schemas import OrderingMode
from inturn.settings.common import KafkaSettings, PostgresSettings


def _default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class PlatformSettings(KafkaSettings):
    """Where each platform's send API is and how to authenticate (one connection pool per platform).

    The credentials default to ``dev-token``, which the platform simulator accepts. In production a credential given
    as a placeholder stops the worker; one left unset is allowed (a deployment rarely uses every platform): the
    worker names those platforms at start, and a send to one of them fails at the platform (401) and is
    dead-lettered. At least one must be set, or the worker could send nowhere.
    """

    unset_allowed_in_production: ClassVar[frozenset[str]] = frozenset(
        {
            "whatsapp_access_token",
            "generic_token",
            "messenger_page_access_token",
            "instagram_access_token",
            "twilio_auth_token",
            "telegram_bot_token",
        }
    )

    whatsapp_base_url: str = Field(
        "https://graph.facebook.com", description="WhatsApp Cloud API base URL (the simulator's URL locally)."
    )
    whatsapp_api_version: str = Field("v21.0", description="Graph API version in the send path.")
    whatsapp_access_token: SecretStr = Field(SecretStr("dev-token"), description="WhatsApp Cloud API bearer token.")
    whatsapp_phone_number_id: str = Field(
        "", description="Default sender phone_number_id when a message carries no account."
    )
    platform_callback_header: bool = Field(
        False,
        description="Send inturn's callback data (room, message, partition) in an X-Inturn-Callback-Data header to "
        "Messenger, Instagram and Telegram, whose APIs have no field for it: for the platform simulator's receipt "
        "log (the demo); real platforms ignore it. Off in production: room ids stay inside.",
    )
    generic_base_url: str = Field("http://127.0.0.1:8090", description="Base URL of the generic JSON platform.")
    generic_token: SecretStr = Field(SecretStr("dev-token"), description="Bearer token for the generic platform.")
    messenger_base_url: str = Field(
        "https://graph.facebook.com", description="Messenger Send API base URL (the simulator's URL locally)."
    )
    messenger_api_version: str = Field("v21.0", description="Graph API version in the Messenger send path.")
    messenger_page_access_token: SecretStr = Field(
        SecretStr("dev-token"), description="Messenger Page access token (sent as a bearer token)."
    )
    messenger_page_id: str = Field(
        "", description="Page id in the send path (/{page-id}/messages) when a message has no account; empty: /me."
    )
    messenger_messaging_type: Literal["RESPONSE", "UPDATE", "MESSAGE_TAG"] = Field(
        "RESPONSE", description="messaging_type of Messenger sends that do not set one in their payload."
    )
    instagram_base_url: str = Field(
        "https://graph.instagram.com",
        description="Instagram messaging Send API base URL (graph.facebook.com "
        "with Facebook Login; the simulator's URL locally).",
    )
    instagram_api_version: str = Field("v21.0", description="Graph API version in the Instagram send path.")
    instagram_access_token: SecretStr = Field(
        SecretStr("dev-token"), description="Instagram user (or Page) access token, sent as a bearer token."
    )
    instagram_account_id: str = Field(
        "",
        description="Instagram professional account id (or Page id) in the send path when a message has no "
        "account; empty: /me.",
    )
    twilio_base_url: str = Field("https://api.twilio.com", description="Twilio REST API base URL.")
    twilio_account_sid: str = Field("", description="Twilio Account SID (AC...): the path's account, Basic auth user.")
    twilio_auth_token: SecretStr = Field(
        SecretStr("dev-token"), description="Twilio Auth Token (Basic auth password; signs status callbacks)."
    )
    twilio_from: str = Field("", description="Sender (From): a Twilio number or 'whatsapp:+...'; or use the next.")
    twilio_messaging_service_sid: str = Field(
        "", description="Messaging Service SID (MG...) sent instead of From when set."
    )
    twilio_status_callback_url: str = Field(
        "",
        description="Public URL of the webhook's Twilio status route; inturn appends the room, message and "
        "partition to its query. Empty: no StatusCallback (acks then only time out).",
    )
    telegram_base_url: str = Field("https://api.telegram.org", description="Telegram Bot API base URL.")
    telegram_bot_token: SecretStr = Field(
        SecretStr("dev-token"), description="Telegram bot token (the path's /bot{token}/)."
    )

    def platforms_without_credentials(self) -> list[str]:
        """In production, the variables of the platform credentials left unset (the worker lists them at start);
        elsewhere none (the development default is the simulator's credential)."""
        if self.environment != "production":
            return []
        return sorted(f"INTURN_{name.upper()}" for name in self.unset_allowed_in_production - self.model_fields_set)

    @model_validator(mode="after")
    def _some_platform_credential_in_production(self) -> PlatformSettings:
        if self.environment == "production" and not self.unset_allowed_in_production & self.model_fields_set:
            names = ", ".join(sorted(f"INTURN_{name.upper()}" for name in self.unset_allowed_in_production))
            raise ValueError(f"no platform credential is set ({names}): in production the worker could send nowhere")
        return self


class WorkerSettings(PlatformSettings, PostgresSettings):
    """The worker: consumer group, ordering, timeouts, retries, limits, backpressure."""

    worker_group_id: str = Field("inturn-workers", description="Consumer group on the messages topic.")
    worker_id: str = Field(default_factory=_default_worker_id, description="This worker's name in events and logs.")
    worker_instance_id: str | None = Field(
        None, description="Static group membership (group.instance.id) for rolling restarts; unset = dynamic."
    )
    worker_mode: OrderingMode = Field(OrderingMode.ACK, description="ack | none | fixed-delay | partition.")
    worker_fixed_delay_ms: int = Field(500, ge=0, description="Wait after each send in fixed-delay mode.")
    worker_ack_timeout_ms: int = Field(10_000, ge=10, description="Ack timeout when a platform has none of its own.")
    worker_ack_timeouts_ms: dict[str, int] = Field(
        default_factory=dict, description='Per-platform ack timeouts as JSON, e.g. {"whatsapp": 8000}.'
    )
    worker_adaptive_timeout: bool = Field(
        False, description="Learn each platform's ack timeout from observed ack latency (quantile x factor)."
    )
    worker_adaptive_quantile: float = Field(0.99, gt=0, lt=1, description="Ack-latency quantile the timeout follows.")
    worker_adaptive_factor: float = Field(3.0, ge=1, description="Multiplier on that quantile.")
    worker_adaptive_min_ms: int = Field(500, ge=10, description="Adaptive timeout lower clamp.")
    worker_adaptive_max_ms: int = Field(30_000, ge=10, description="Adaptive timeout upper clamp.")
    worker_early_ack_ttl_ms: int = Field(120_000, ge=1000, description="How long an ack that beat its send is kept.")
    worker_send_timeout_ms: int = Field(
        10_000,
        ge=100,
        description="Timeout of one send attempt on the wire: connecting, then waiting for the answer "
        "(the wait for a free pooled connection is not counted).",
    )
    worker_retry_max_attempts: int = Field(8, ge=1, description="Send attempts before a transient error is final.")
    worker_retry_base_ms: int = Field(
        200, ge=1, description="Backoff base (doubling; each delay uniform in its upper half)."
    )
    worker_retry_cap_ms: int = Field(30_000, ge=1, description="Largest single backoff.")
    worker_retry_max_elapsed_ms: int = Field(300_000, ge=1, description="Give up retrying after this long.")
    worker_dead_letter_policy: Literal["skip", "block"] = Field(
        "skip", description="After a dead letter the room goes on (skip) or waits for an operator (block)."
    )
    worker_rate_limit_per_s: float = Field(80.0, gt=0, description="Sends per second per platform account.")
    worker_rate_burst: int = Field(80, ge=1, description="Token bucket size per platform account.")
    worker_rate_limits_per_s: dict[str, PositiveFloat] = Field(
        default_factory=dict,
        description='Per-platform sends per second per account as JSON, e.g. {"twilio": 1, "telegram": 30}; '
        "the bucket then holds one second of sends. Other platforms use worker_rate_limit_per_s.",
    )
    worker_breaker_failure_ratio: float = Field(0.5, gt=0, le=1, description="Failure share that opens the breaker.")
    worker_breaker_min_calls: int = Field(20, ge=1, description="Calls in the window before the ratio counts.")
    worker_breaker_window_s: float = Field(30.0, gt=0, description="Sliding window of the failure ratio.")
    worker_breaker_open_s: float = Field(5.0, gt=0, description="How long the breaker stays open before probing.")
    worker_breaker_probes: int = Field(3, ge=1, description="Successful half-open probes that close it.")
    worker_pool_size: int = Field(200, ge=1, description="HTTP connections per platform (bulkhead).")
    worker_prepare_ahead: int = Field(
        0,
        ge=0,
        description="Messages of a room rendered ahead while one awaits its ack (each holds its body meanwhile; a "
        "render takes microseconds).",
    )
    worker_gc_young_threshold: int = Field(
        20_000,
        ge=0,
        description="Net container allocations between young garbage collections (CPython's default is 700); "
        "objects built at start-up are frozen. 0 leaves the collector at its defaults.",
    )
    worker_high_watermark: int = Field(5000, ge=1, description="Buffered messages that pause a partition.")
    worker_low_watermark: int = Field(1000, ge=0, description="Buffered messages below which it resumes.")
    worker_room_idle_ms: int = Field(
        0,
        ge=0,
        description="How long a room's loop waits for the room's next message before it retires; 0 retires it as "
        "soon as the room has nothing to send (the next message starts another). A waiting loop holds a task, a "
        "future and a deadline that the garbage collector walks, in every idle room.",
    )
    worker_commit_interval_ms: int = Field(1000, ge=50, description="How often completed offsets are committed.")
    worker_poll_batch: int = Field(500, ge=1, description="Records taken per consume call.")
    worker_session_timeout_ms: int = Field(15_000, ge=1000, description="Consumer group session timeout.")
    worker_fetch_wait_max_ms: int = Field(
        100,
        ge=0,
        le=300_000,
        description="librdkafka fetch.wait.max.ms of the messages consumer: the longest the broker holds a fetch "
        "while less than the fetch's minimum bytes have arrived (the most it adds to a message's wait).",
    )
    worker_fetch_min_bytes: int = Field(
        262_144,
        ge=1,
        le=100_000_000,
        description="librdkafka fetch.min.bytes of the messages consumer: bytes a fetch waits for (up to its "
        "wait) before the broker answers; larger: fewer, fuller fetch requests.",
    )
    worker_acks_fetch_wait_max_ms: int = Field(
        500,
        ge=0,
        le=300_000,
        description="fetch.wait.max.ms of the acks reader: the most it adds to an ack's way to the worker.",
    )
    worker_acks_fetch_min_bytes: int = Field(1, ge=1, le=100_000_000, description="fetch.min.bytes of the acks reader.")
    worker_revoke_grace_ms: int = Field(
        15_000,
        ge=0,
        description="On revoke/shutdown, how long in-flight messages get to reach an outcome; more than the ack "
        "timeout plus a send, so that each one does (acked or timed out) and none is sent again.",
    )
    worker_dedup_window: int = Field(
        4,
        ge=0,
        le=1024,
        description="Message ids remembered per room (with its cursor): a second copy of one of the room's last N "
        "sent messages is recorded as a duplicate and not sent. 0 turns this off (only offsets are compared). Each id "
        "costs 8 bytes per room, in memory and in every cursor write.",
    )
    worker_cursor_flush_ms: int = Field(200, ge=10, description="How often room cursors are written (batched).")
    worker_ack_lookback_ms: int = Field(
        60_000, ge=0, description="Read acks partitions from this far before an assignment (acks that raced it)."
    )
    worker_http_host: str = Field(
        "0.0.0.0",  # noqa: S104 - the probes and Prometheus reach the pod from outside
        description="Bind address of the internal HTTP server (/metrics, /healthz, /readyz, /rooms/{room_id}).",
    )
    worker_http_port: int = Field(
        8081, ge=0, le=65535, description="Port of the internal HTTP server; never routed by an Ingress."
    )
    worker_room_api_token: SecretStr | None = Field(
        None,
        description="Bearer token /rooms/{room_id} requires (401 without it); unset: the room API is off (404). "
        "`inturn rooms show` sends this variable's value.",
    )

    def rate_limit(self, platform: str) -> tuple[float, int]:
        """Sends per second per account of ``platform``, and its token bucket's size."""
        rate = self.worker_rate_limits_per_s.get(platform)
        if rate is None:
            return self.worker_rate_limit_per_s, self.worker_rate_burst
        return rate, max(1, round(rate))

    def ack_timeout_ms(self, platform: str) -> int:
        """The configured (non-adaptive) ack timeout for ``platform``."""
        return self.worker_ack_timeouts_ms.get(platform, self.worker_ack_timeout_ms)
