"""What the report can see of each platform: a figure is only given where the platform's callbacks can show it.

The out-of-order rate compares the device times of a room's messages, the delivered rate counts delivery
statuses, and the device latency is a message's device time less its send: all three come from what the platform
reports, which depends on how it acknowledges a message (``inturn.platforms.AckKind``):

- ``per_message`` (WhatsApp, Twilio, generic): a status per message with the platform's own time: all measurable.
  (Twilio's callbacks carry no time: its device time is when the webhook received the status, docs/reports.md.)
- ``watermark`` (Messenger): a delivery callback confirms every earlier message of the recipient at once; the
  messages it covers share its one time, so they never invert: the out-of-order rate is not measurable (it would
  read 0 whatever the order at the device), nor the device latency (the watermark is a bound on the sends it
  covers, not the time each reached the device). Delivery is reported (the watermark says delivered).
- ``synchronous`` (Telegram, Instagram): the answer to the send is the ack; nothing reports the device's time or a
  delivery: none of the three is measurable.

A figure that is not measurable is null in the tables, never 0, and the reason is written beside it
(``out_of_order_note``, ``delivered_note``, ``device_latency_note``); the page shows "not measurable" with the
reason.
"""

from __future__ import annotations

from inturn.platforms import ADAPTERS, AckKind

#: Why a figure cannot be measured, by ack kind and figure ("out_of_order", "delivered", "device_latency").
REASONS: dict[AckKind, dict[str, str]] = {
    AckKind.WATERMARK: {
        "out_of_order": "delivery watermarks confirm every earlier message at once, so the messages share one "
        "device time and cannot be ordered",
        "device_latency": "a delivery watermark bounds the sends it covers; it is not the time each reached the device",
    },
    AckKind.SYNCHRONOUS: {
        "out_of_order": "the platform answers the send synchronously and reports no device time",
        "delivered": "the platform reports no delivery; its answer to the send is the only ack",
        "device_latency": "the platform answers the send synchronously and reports no device time",
    },
}


def ack_kind(platform: str | None) -> AckKind | None:
    """How ``platform`` acknowledges a message; None for a platform the report does not know."""
    adapter = ADAPTERS.get(platform or "")
    return adapter.ack_kind if adapter is not None else None


def not_measurable(platform: str | None, figure: str) -> str | None:
    """Why ``figure`` ("out_of_order", "delivered", "device_latency") cannot be measured on ``platform``; None when
    it can."""
    kind = ack_kind(platform)
    return REASONS.get(kind, {}).get(figure) if kind is not None else None


def without_device_latency() -> tuple[str, ...]:
    """The platforms whose device latency is not measurable: the pass leaves their device times out of it, so that
    no table (the latency histogram sums every platform) counts them."""
    return tuple(sorted(name for name in ADAPTERS if not_measurable(name, "device_latency") is not None))
