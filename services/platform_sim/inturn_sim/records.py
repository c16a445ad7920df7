"""What the simulator keeps per accepted message and per due status, and its counters."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

# What happens to an accepted message once its latency has passed.
DELIVER = 0  # reaches the device; sent, delivered (and maybe read) are called back
DROP = 1  # reaches the device; every callback is lost
FAIL = 2  # never reaches the device; a 'failed' status is called back


@dataclass(slots=True, eq=False)
class Sent:
    """One accepted send, from acceptance until its last status was called back."""

    wamid: str
    to: str
    phone_number_id: str
    callback_data: str | None
    room_id: str | None
    message_id: str | None
    accepted_at_ms: int
    fate: int
    read: bool
    generation: int
    platform: str = "whatsapp"  # whatsapp, messenger, instagram, twilio or telegram
    callback_url: str | None = None  # Twilio: the send's StatusCallback
    sender: str | None = None  # Twilio: the send's From (or Messaging Service SID)
    via: str | None = None  # the sending process's name, from a /_via/{name}/ send path (WhatsApp)


class Status:
    """A status of one send that is due to be called back (``ts_ms``: when it happened). A Messenger delivery
    covers several sends of one recipient: ``covers`` lists their ids (None: ``mids`` left out, as older Messenger
    clients do) and ``ts_ms`` is the watermark."""

    __slots__ = ("covers", "sent", "status", "ts_ms")

    def __init__(self, sent: Sent, status: str, ts_ms: int, covers: list[str] | None = None) -> None:
        self.sent = sent
        self.status = status
        self.ts_ms = ts_ms
        self.covers = covers


@dataclass(slots=True)
class Stats:
    """The counters of ``GET /_sim/stats`` and ``/metrics`` (cleared by ``POST /_sim/reset``)."""

    accepted: int = 0
    rejected: dict[int, int] = field(default_factory=dict)  # by HTTP status answered
    deliveries: int = 0  # receipts written (device deliveries)
    duplicates: int = 0  # deliveries of a (room_id, message_id) seen before
    failed_messages: int = 0  # accepted, then a 'failed' status instead of a delivery
    callbacks_dropped: int = 0  # messages whose statuses were all dropped (drop_rate)
    callbacks_sent: int = 0  # statuses in callback requests answered 2xx
    callbacks_by_status: dict[str, int] = field(default_factory=dict)
    callback_requests: int = 0  # callback requests answered 2xx
    callback_retries: int = 0  # callback requests retried after non-2xx or no answer
    callbacks_failed: int = 0  # statuses given up after the last retry
    callbacks_duplicated: int = 0  # statuses the platform called back a second time (callback_duplicate_rate)
    callbacks_delayed: int = 0  # statuses held back by callback_delay before being called back
    callbacks_unsent: int = 0  # statuses not sent because no webhook URL is configured
    withheld: int = 0  # statuses held back right now (withhold_recipients)
    pending: int = 0  # accepted messages not yet at the device
    slow_answers: int = 0  # sends accepted and answered only after slow_ms (their callbacks may come first)

    def reject(self, status: int) -> None:
        """Count one send answered with an error ``status``."""
        self.rejected[status] = self.rejected.get(status, 0) + 1

    def clear(self) -> None:
        """Every counter back to zero."""
        fresh = Stats()
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))

    def snapshot(self) -> dict[str, Any]:
        """The counters as JSON-ready data."""
        data = asdict(self)
        data["rejected"] = {str(code): n for code, n in self.rejected.items()}
        return data
