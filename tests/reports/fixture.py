"""Five rooms written out by hand, with their out-of-order rates worked out by hand.

Times are milliseconds after ``t0``. "dev" is the platform timestamp the device got the message
(the ``delivered`` status, or ``sent`` when delivered never came). Room order is offset order.

Room A (fx-whatsapp, ack), partition 0, offsets 10-13:
  a1  dispatched 1000, acked 1030,            dev 1100
  a2  dispatched 1200, ACK TIMEOUT at 2200,    dev 2500 (delivered late: a LATE ACK at 2520)
  a3  dispatched 2200, acked 2320,            dev 2300  -> before a2's 2500: INVERTED
  a4  dispatched 2400, acked 2470,            dev 2450 (only 'sent' came; matched by platform id)
  pairs (a1,a2) (a2,a3) (a3,a4): 1 of 3 inverted -> 1/3
Room B (fx-whatsapp, none), partition 1, offsets 5-8: dispatched 1000..1003 without waiting
  dev 1050, 1040 (INVERTED), 1060, none (no status at all: 'no device timestamp', no pair) -> 1/2
Room C (fx-instagram, ack), partition 2, offsets 1-3:
  c1  dispatched 3000, acked 3020 on 'sent',  dev 3600 (phone offline a while)
  c2  retried once, then DEAD LETTERED (never dispatched, no device time: skipped in pairs)
  c3  dispatched 3400, acked 3420,            dev 3450  -> before c1's 3600: INVERTED -> 1/1
Room D (fx-whatsapp, ack), partition 3: message "d-y" at offset 3, "d-x" at offset 7
  d-y dispatched 4000, acked 4030,  dev 5000;  d-x dispatched 4100, acked 4420, dev 4400
  offset order y, x: INVERTED -> 1/1 (by message id x, y it would not be)
Room E (fx-whatsapp, fixed-delay), partition 0, offsets 20-21: no statuses at all
  e1 dispatched 6000, its 'sent' event at 6050; e2 dispatched 6020, before e1 finished:
  one DISPATCH ORDER VIOLATION; no device times -> no pairs, rate undefined (null)

Per platform and mode: fx-whatsapp/ack = A + D = 2 of 4 pairs = 0.5; fx-whatsapp/none = 0.5;
fx-instagram/ack = 1.0; fx-whatsapp/fixed-delay = null, with 1 dispatch violation.
"""

from __future__ import annotations

from typing import Any

from inturn.schemas import Ack, AckStatus, Event, EventType, OrderingMode
from tests.reports.generator import Stream

#: room -> (pairs, inverted, out_of_order_rate, ack_timeouts, late_acks, dead_letters, dispatch_violations)
ROOMS = {
    "fx-A": (3, 1, 1 / 3, 1, 1, 0, 0),
    "fx-B": (2, 1, 0.5, 0, 0, 0, 0),
    "fx-C": (1, 1, 1.0, 0, 0, 1, 0),
    "fx-D": (1, 1, 1.0, 0, 0, 0, 0),
    "fx-E": (0, 0, None, 0, 0, 0, 1),
}

#: (platform, mode) -> (messages, pairs, inverted, out_of_order_rate, ack_timeouts, late_acks, no_device_ts,
#:                      dispatch_violations)
GROUPS = {
    ("fx-whatsapp", "ack"): (6, 4, 2, 0.5, 1, 1, 0, 0),
    ("fx-whatsapp", "none"): (4, 2, 1, 0.5, 0, 0, 1, 0),
    ("fx-instagram", "ack"): (3, 1, 1, 1.0, 0, 0, 1, 0),
    ("fx-whatsapp", "fixed-delay"): (2, 0, 0, None, 0, 0, 2, 1),
}


def hand_fixture(t0: int) -> Stream:
    """The five rooms' events and acks, at ``t0`` + the times above."""
    out = Stream()

    def ev(
        kind: EventType, room: str, msg: str, platform: str, mode: str, part: int, offset: int, ts: int, **kw: Any
    ) -> None:
        out.events.append(Event(type=kind, room_id=room, message_id=msg, platform=platform, partition=part,
                                offset=offset, worker_id="w-fx", mode=OrderingMode(mode), ts_ms=t0 + ts,
                                created_at_ms=t0 + ts - 100, **kw))  # fmt: skip

    def ack(room: str, msg: str | None, platform: str, pmid: str, status: AckStatus, dev: int) -> None:
        out.acks.append(Ack(room_id=room, message_id=msg, platform=platform, platform_message_id=pmid,
                            status=status, platform_ts_ms=t0 + dev, received_at_ms=t0 + dev + 10))  # fmt: skip

    def dispatch(room: str, msg: str, platform: str, mode: str, part: int, offset: int, at: int) -> None:
        ev(EventType.DISPATCHED, room, msg, platform, mode, part, offset, at, sent_at_ms=t0 + at,
           platform_message_id=f"pm-{msg}")  # fmt: skip

    wa, ig = "fx-whatsapp", "fx-instagram"
    # Room A
    for msg, offset, sent, end in [("a1", 10, 1000, 1030), ("a3", 12, 2200, 2320), ("a4", 13, 2400, 2470)]:
        dispatch("fx-A", msg, wa, "ack", 0, offset, sent)
        ev(EventType.ACKED, "fx-A", msg, wa, "ack", 0, offset, end, sent_at_ms=t0 + sent, acked_at_ms=t0 + end - 10)
    ack("fx-A", "a1", wa, "pm-a1", AckStatus.SENT, 1010)
    ack("fx-A", "a1", wa, "pm-a1", AckStatus.DELIVERED, 1100)
    ack("fx-A", "a3", wa, "pm-a3", AckStatus.DELIVERED, 2300)
    ack("fx-A", None, wa, "pm-a4", AckStatus.SENT, 2450)
    dispatch("fx-A", "a2", wa, "ack", 0, 11, 1200)
    ev(EventType.ACK_TIMEOUT, "fx-A", "a2", wa, "ack", 0, 11, 2200, sent_at_ms=t0 + 1200)
    ack("fx-A", "a2", wa, "pm-a2", AckStatus.DELIVERED, 2500)
    ev(EventType.LATE_ACK, "fx-A", "a2", wa, "ack", 0, 11, 2520, acked_at_ms=t0 + 2510)
    # Room B
    for i, dev in enumerate([1050, 1040, 1060, None]):
        msg = f"b{i + 1}"
        dispatch("fx-B", msg, wa, "none", 1, 5 + i, 1000 + i)
        ev(EventType.SENT, "fx-B", msg, wa, "none", 1, 5 + i, 1000 + i, sent_at_ms=t0 + 1000 + i)
        if dev is not None:
            ack("fx-B", msg, wa, f"pm-{msg}", AckStatus.DELIVERED, dev)
    # Room C
    dispatch("fx-C", "c1", ig, "ack", 2, 1, 3000)
    ack("fx-C", "c1", ig, "pm-c1", AckStatus.SENT, 3005)
    ev(EventType.ACKED, "fx-C", "c1", ig, "ack", 2, 1, 3020, sent_at_ms=t0 + 3000, acked_at_ms=t0 + 3015)
    ack("fx-C", "c1", ig, "pm-c1", AckStatus.DELIVERED, 3600)
    ev(EventType.RETRIED, "fx-C", "c2", ig, "ack", 2, 2, 3100, detail="503")
    ev(EventType.DEAD_LETTERED, "fx-C", "c2", ig, "ack", 2, 2, 3300, attempt=2, detail="400")
    dispatch("fx-C", "c3", ig, "ack", 2, 3, 3400)
    ack("fx-C", "c3", ig, "pm-c3", AckStatus.SENT, 3410)
    ev(EventType.ACKED, "fx-C", "c3", ig, "ack", 2, 3, 3420, sent_at_ms=t0 + 3400, acked_at_ms=t0 + 3420)
    ack("fx-C", "c3", ig, "pm-c3", AckStatus.DELIVERED, 3450)
    # Room D: ids sort the other way round from offsets
    dispatch("fx-D", "d-y", wa, "ack", 3, 3, 4000)
    ack("fx-D", None, wa, "pm-d-y", AckStatus.SENT, 4010)
    ev(EventType.ACKED, "fx-D", "d-y", wa, "ack", 3, 3, 4030, sent_at_ms=t0 + 4000, acked_at_ms=t0 + 4020)
    ack("fx-D", None, wa, "pm-d-y", AckStatus.DELIVERED, 5000)
    dispatch("fx-D", "d-x", wa, "ack", 3, 7, 4100)
    ack("fx-D", "d-x", wa, "pm-d-x", AckStatus.DELIVERED, 4400)
    ev(EventType.ACKED, "fx-D", "d-x", wa, "ack", 3, 7, 4420, sent_at_ms=t0 + 4100, acked_at_ms=t0 + 4410)
    # Room E
    dispatch("fx-E", "e1", wa, "fixed-delay", 0, 20, 6000)
    ev(EventType.SENT, "fx-E", "e1", wa, "fixed-delay", 0, 20, 6050, sent_at_ms=t0 + 6000)
    dispatch("fx-E", "e2", wa, "fixed-delay", 0, 21, 6020)
    ev(EventType.SENT, "fx-E", "e2", wa, "fixed-delay", 0, 21, 6070, sent_at_ms=t0 + 6020)
    return out
