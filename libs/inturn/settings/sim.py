"""Settings of the platform simulator (``inturn sim``): ``INTURN_SIM_*``.

The simulator needs no Kafka, so it extends ``InturnSettings`` only. Every knob of the delivery
model and of the faults can also be changed at run time through ``POST /_sim/config``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from inturn.settings.common import InturnSettings


class SimSettings(InturnSettings):
    """The WhatsApp-Cloud-like platform double: where it listens, whom it calls back, how it misbehaves."""

    sim_host: str = Field("127.0.0.1", description="Interface the simulator listens on.")
    sim_port: int = Field(8089, ge=0, le=65535, description="Port the simulator listens on (0: any free port).")
    sim_webhook_url: str = Field(
        "", description="Where status callbacks are POSTed (inturn's webhook); empty: statuses are not sent."
    )
    sim_app_secret: SecretStr = Field(
        SecretStr("dev-secret"), description="App secret signing callbacks (X-Hub-Signature-256 HMAC-SHA256)."
    )
    sim_access_token: SecretStr = Field(
        SecretStr("dev-token"), description="Bearer token the send API accepts (anything else gets 401)."
    )
    sim_messenger_webhook_url: str = Field(
        "", description="Where Messenger delivery callbacks are POSTed (object 'page'); empty: not sent."
    )
    sim_instagram_webhook_url: str = Field(
        "", description="Where Instagram messaging_seen callbacks are POSTed (object 'instagram'); empty: not sent."
    )
    sim_messenger_mids_absent_rate: float = Field(
        0.3, ge=0, le=1, description="Share of Messenger delivery callbacks sent without mids (watermark only)."
    )
    sim_twilio_auth_token: SecretStr = Field(
        SecretStr("dev-token"),
        description="Twilio Auth Token: Basic auth password of Twilio sends, and the key of X-Twilio-Signature.",
    )
    sim_waba_id: str = Field("102290129340398", description="WhatsApp Business Account id in callbacks (entry.id).")
    sim_display_phone_number: str = Field(
        "15550783881", description="display_phone_number in callback metadata (one for every phone_number_id)."
    )

    # Delivery model: a lognormal latency from acceptance to the recipient's device.
    sim_latency_median_ms: float = Field(100.0, gt=0, description="Median of the send-to-device latency.")
    sim_latency_p99_ms: float = Field(
        400.0, gt=0, description="99th percentile of the latency; equal to the median for a fixed latency."
    )
    sim_latency_max_ms: float = Field(5_000.0, gt=0, description="Latencies drawn above this are capped to it.")
    sim_delivered_delay_ms: float = Field(
        20.0, ge=0, description="From the 'sent' callback's answer to the 'delivered' status."
    )
    sim_read_rate: float = Field(0.0, ge=0, le=1, description="Share of delivered messages that also get 'read'.")
    sim_read_delay_ms: float = Field(200.0, ge=0, description="From the 'delivered' callback's answer to 'read'.")
    sim_timestamp_precision: Literal["ms", "s"] = Field(
        "ms", description="Status timestamps as '<seconds>.<millis>' (ms, our extension) or whole seconds (s, Meta)."
    )
    sim_seed: int = Field(42, description="Seed of every random draw (latency, drops, faults).")

    # Faults.
    sim_drop_rate: float = Field(0.0, ge=0, le=1, description="Share of messages whose callbacks are all lost.")
    sim_failed_rate: float = Field(
        0.0, ge=0, le=1, description="Share of accepted messages that later get a 'failed' status instead."
    )
    sim_error_rate_5xx: float = Field(0.0, ge=0, le=1, description="Share of sends answered 500 (Meta code 131000).")
    sim_slow_rate: float = Field(0.0, ge=0, le=1, description="Share of sends answered only after sim_slow_ms.")
    sim_slow_ms: float = Field(2_000.0, ge=0, description="How long a slow answer takes.")
    sim_rate_limit_per_s: float = Field(
        80.0, ge=0, description="Sends per second per phone_number_id before 429 / 130429 (0: no limit)."
    )

    # Callbacks.
    sim_callback_batch_max: int = Field(50, ge=1, le=1000, description="Most statuses in one callback request.")
    sim_callback_concurrency: int = Field(8, ge=1, le=256, description="Callback requests in flight at once.")
    sim_callback_retries: int = Field(
        3, ge=0, le=20, description="Retries of a callback that got non-2xx or no answer, then it is given up."
    )
    sim_callback_backoff_ms: float = Field(
        200.0, ge=0, description="First retry delay; doubles with every further retry."
    )
    sim_callback_timeout_s: float = Field(5.0, gt=0, description="Timeout of one callback request.")
    sim_callback_delay_median_ms: float = Field(
        0.0, ge=0, description="Median of a lognormal delay before each due status is called back (0: none)."
    )
    sim_callback_delay_p99_ms: float = Field(0.0, ge=0, description="99th percentile of that delay.")
    sim_callback_delay_max_ms: float = Field(30_000.0, gt=0, description="That delay is capped to this.")
    sim_callback_duplicate_rate: float = Field(
        0.0, ge=0, le=1, description="Share of answered callback requests the platform sends once more, later."
    )
    sim_callback_duplicate_delay_ms: float = Field(
        1_000.0, ge=0, description="A duplicated callback request is sent again after a uniform 0..this delay."
    )

    # Receipt log.
    sim_receipts_path: str | None = Field(
        None, description="Also write the receipt log as JSON lines to this file (buffered)."
    )
    sim_receipts_memory_max: int = Field(
        1_000_000, ge=1, description="Newest receipts kept in memory for GET /_sim/receipts (the file keeps all)."
    )
    sim_receipts_flush_s: float = Field(0.5, gt=0, description="How often the receipt file buffer is flushed.")

    @model_validator(mode="after")
    def _latency_is_ordered(self) -> SimSettings:
        if self.sim_latency_p99_ms < self.sim_latency_median_ms:
            raise ValueError("INTURN_SIM_LATENCY_P99_MS must be >= INTURN_SIM_LATENCY_MEDIAN_MS")
        if self.sim_callback_delay_median_ms and self.sim_callback_delay_p99_ms < self.sim_callback_delay_median_ms:
            raise ValueError("INTURN_SIM_CALLBACK_DELAY_P99_MS must be >= INTURN_SIM_CALLBACK_DELAY_MEDIAN_MS")
        return self
