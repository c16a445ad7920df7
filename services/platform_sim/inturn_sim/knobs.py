"""The simulator's runtime knobs: started from ``SimSettings``, changed by ``POST /_sim/config``."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from inturn.settings.sim import SimSettings

_Z99 = 2.3263478740408408  # the standard normal's 99th percentile


@dataclass(slots=True)
class Knobs:
    """What ``POST /_sim/config`` may change while the simulator runs (names without the ``sim_`` prefix)."""

    webhook_url: str
    messenger_webhook_url: str
    instagram_webhook_url: str
    messenger_mids_absent_rate: float
    latency_median_ms: float
    latency_p99_ms: float
    latency_max_ms: float
    delivered_delay_ms: float
    read_rate: float
    read_delay_ms: float
    timestamp_precision: Literal["ms", "s"]
    drop_rate: float
    failed_rate: float
    error_rate_5xx: float
    slow_rate: float
    slow_ms: float
    rate_limit_per_s: float
    callback_retries: int
    callback_backoff_ms: float
    callback_delay_median_ms: float
    callback_delay_p99_ms: float
    callback_delay_max_ms: float
    callback_duplicate_rate: float
    callback_duplicate_delay_ms: float
    withhold_recipients: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, settings: SimSettings) -> Knobs:
        """The knobs as the settings start them."""
        values = {
            name: getattr(settings, f"sim_{name}") for name in cls.__dataclass_fields__ if name != "withhold_recipients"
        }
        return cls(**values)


class ConfigUpdate(BaseModel):
    """Body of ``POST /_sim/config``: any subset of the knobs; unknown names are refused (400)."""

    model_config = ConfigDict(extra="forbid")

    webhook_url: str | None = None
    messenger_webhook_url: str | None = None
    instagram_webhook_url: str | None = None
    messenger_mids_absent_rate: float | None = Field(None, ge=0, le=1)
    latency_median_ms: float | None = Field(None, gt=0)
    latency_p99_ms: float | None = Field(None, gt=0)
    latency_max_ms: float | None = Field(None, gt=0)
    delivered_delay_ms: float | None = Field(None, ge=0)
    read_rate: float | None = Field(None, ge=0, le=1)
    read_delay_ms: float | None = Field(None, ge=0)
    timestamp_precision: Literal["ms", "s"] | None = None
    drop_rate: float | None = Field(None, ge=0, le=1)
    failed_rate: float | None = Field(None, ge=0, le=1)
    error_rate_5xx: float | None = Field(None, ge=0, le=1)
    slow_rate: float | None = Field(None, ge=0, le=1)
    slow_ms: float | None = Field(None, ge=0)
    rate_limit_per_s: float | None = Field(None, ge=0)
    callback_retries: int | None = Field(None, ge=0, le=20)
    callback_backoff_ms: float | None = Field(None, ge=0)
    callback_delay_median_ms: float | None = Field(None, ge=0)
    callback_delay_p99_ms: float | None = Field(None, ge=0)
    callback_delay_max_ms: float | None = Field(None, gt=0)
    callback_duplicate_rate: float | None = Field(None, ge=0, le=1)
    callback_duplicate_delay_ms: float | None = Field(None, ge=0)
    withhold_recipients: list[str] | None = None
    seed: int | None = Field(None, description="Re-seed the random draws.")

    @model_validator(mode="after")
    def _p99_not_below_median(self) -> ConfigUpdate:
        if self.latency_median_ms and self.latency_p99_ms and self.latency_p99_ms < self.latency_median_ms:
            raise ValueError("latency_p99_ms must be >= latency_median_ms")
        median, p99 = self.callback_delay_median_ms, self.callback_delay_p99_ms
        if median and p99 is not None and p99 < median:
            raise ValueError("callback_delay_p99_ms must be >= callback_delay_median_ms")
        return self


class Latency:
    """Send-to-device latency in seconds: lognormal with the given median and 99th percentile, capped."""

    def __init__(self, rng: random.Random, median_ms: float, p99_ms: float, max_ms: float) -> None:
        if p99_ms < median_ms:
            raise ValueError("latency p99 below its median")
        self._rng = rng
        self._mu = math.log(median_ms / 1000)
        self._sigma = math.log(p99_ms / median_ms) / _Z99
        self._max = max_ms / 1000

    def draw(self) -> float:
        """One latency (seconds); a fixed one when p99 equals the median."""
        if self._sigma == 0.0:
            return min(math.exp(self._mu), self._max)
        return min(self._rng.lognormvariate(self._mu, self._sigma), self._max)
