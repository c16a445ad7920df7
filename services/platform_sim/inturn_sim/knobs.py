"""The simulator's runtime knobs: started from ``SimSettings``, changed by ``POST /_sim/config``."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

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


class KnobsUpdate(BaseModel):
    """Body of ``POST /_sim/config``: any subset of the knobs; unknown names are refused (400). ``ConfigUpdate`` adds
    the knobs themselves, each of the type and within the bounds of its setting."""

    model_config = ConfigDict(extra="forbid")

    withhold_recipients: list[str] | None = None
    seed: int | None = Field(None, description="Re-seed the random draws.")

    @model_validator(mode="after")
    def _p99_not_below_median(self) -> KnobsUpdate:
        given = self.model_dump(exclude_none=True)
        for delay in ("latency", "callback_delay"):
            median, p99 = given.get(f"{delay}_median_ms"), given.get(f"{delay}_p99_ms")
            if median and p99 is not None and p99 < median:
                raise ValueError(f"{delay}_p99_ms must be >= {delay}_median_ms")
        return self


def _knob_fields() -> dict[str, Any]:
    """Each knob of ``Knobs`` as ``POST /_sim/config`` takes it: the type and bounds of its setting
    (``SimSettings.sim_<name>``), or None (unchanged)."""
    fields: dict[str, Any] = {}
    for name in Knobs.__dataclass_fields__:
        if name == "withhold_recipients":  # a list in the body, no setting
            continue
        setting = SimSettings.model_fields[f"sim_{name}"]
        kind: Any = setting.annotation  # float, int, str or a Literal: every knob's setting has one
        optional = kind | None
        fields[name] = (Annotated[(optional, *setting.metadata)] if setting.metadata else optional, None)
    return fields


#: The model of ``POST /_sim/config``'s body (``KnobsUpdate`` with every knob).
ConfigUpdate: type[KnobsUpdate] = create_model(
    "ConfigUpdate", __base__=KnobsUpdate, __module__=__name__, **_knob_fields()
)


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
