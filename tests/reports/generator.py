"""A seeded stream of worker events and platform acks, shaped like a real run's.

Rooms are spread over platforms, ordering modes and partitions. Messages meet every outcome the
report counts: acked, ack timeout (some with a late ack), retries, dead letters, duplicate
dispatches, skipped duplicates, acks that name the message and acks matched only by platform
message id, statuses that never arrive, and device deliveries that overtake each other.

Two shapes of the worker's events: with a ``dispatched`` event per send besides the terminal event
(older nights), or the terminal event alone, carrying the send's ``sent_at_ms`` and
``platform_message_id`` (one event per message outcome). A re-send after a rebalance shows only in
the first shape (two ``dispatched`` events); in the second the terminal event names the last send.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from inturn.schemas import Ack, AckStatus, Event, EventType, OrderingMode

PLATFORMS = ("whatsapp", "instagram", "messenger")
MODES = tuple(m.value for m in OrderingMode)
PARTITIONS = 4


@dataclass
class Stream:
    """The generated records, in no particular order."""

    events: list[Event] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)


def generate(
    seed: int, rooms: int, messages_per_room: int, start_ms: int, span_ms: int, *, dispatched_events: bool = True
) -> Stream:
    """Events and acks of ``rooms`` rooms with about ``messages_per_room`` messages each, from ``start_ms``.

    Without ``dispatched_events`` no ``dispatched`` event is written: the terminal one carries the send.
    """
    rng = random.Random(seed)
    out = Stream()
    offsets = [0] * PARTITIONS
    for r in range(rooms):
        room = f"room-{seed}-{r:04d}"
        platform = PLATFORMS[r % len(PLATFORMS)]
        mode = MODES[(r // len(PLATFORMS)) % len(MODES)]
        partition = rng.randrange(PARTITIONS)
        clock = start_ms + rng.randrange(span_ms)
        for m in range(rng.randint(1, 2 * messages_per_room - 1)):
            offsets[partition] += rng.randint(1, 3)  # other rooms share the partition
            msg = f"{room}-m{m:03d}"
            clock = _message(rng, out, (room, msg, platform, mode), partition, offsets[partition], clock)
    if not dispatched_events:
        out.events = [e for e in out.events if e.type != EventType.DISPATCHED]
    # Acks for messages nobody dispatched (another deployment's, or garbage) must be ignored.
    for i in range(3):
        out.acks.append(
            Ack(room_id=f"ghost-{i}", message_id=None, platform="whatsapp", platform_message_id=f"ghost-pm-{seed}-{i}",
                status=AckStatus.DELIVERED, platform_ts_ms=start_ms + i, received_at_ms=start_ms + i)
        )  # fmt: skip
    return out


def _message(rng: random.Random, out: Stream, names: tuple[str, str, str, str], part: int, offset: int, t: int) -> int:
    """Append one message's records (``names``: room, message, platform, mode); returns when the room may go on."""
    room, msg, platform, mode = names
    created = t - rng.randint(0, 500)

    def event(kind: EventType, ts: int, **kw: Any) -> None:
        out.events.append(
            Event(type=kind, room_id=room, message_id=msg, platform=platform, partition=part, offset=offset,
                  worker_id="w1", mode=OrderingMode(mode), ts_ms=ts, created_at_ms=created, consumed_at_ms=t, **kw)
        )  # fmt: skip

    roll = rng.random()
    if roll < 0.03:
        event(EventType.SKIPPED_DUPLICATE, t, detail="room cursor")
        return t + 1
    retries = rng.choice([0, 0, 0, 0, 1, 2])
    for attempt in range(1, retries + 1):
        event(EventType.RETRIED, t, attempt=attempt, detail="429")
        t += rng.randint(5, 200)
    if roll < 0.07:
        event(EventType.DEAD_LETTERED, t, attempt=retries + 1, detail="400 bad recipient")
        return t + 1
    dispatches = 2 if rng.random() < 0.04 else 1  # re-sent after a rebalance: a duplicate
    pmid = ""
    for d in range(dispatches):
        pmid = f"pm-{msg}-{d}"
        event(EventType.DISPATCHED, t, sent_at_ms=t, platform_message_id=pmid, attempt=retries + 1)
        if d + 1 < dispatches:
            t += rng.randint(1, 50)
    sent_at = t
    # What the platform reports, and when it reaches the device: overlapping deliveries overtake.
    delivered_at = sent_at + rng.randint(20, 3000)
    name = msg if rng.random() < 0.6 else None  # else the webhook only knows the platform message id
    statuses: list[tuple[AckStatus, int]] = []
    lost = rng.random()
    if lost > 0.08:
        statuses.append((AckStatus.SENT, sent_at + rng.randint(5, 40)))
    if lost > 0.2:
        statuses.append((AckStatus.DELIVERED, delivered_at))
        if rng.random() < 0.5:
            statuses.append((AckStatus.READ, delivered_at + rng.randint(100, 5000)))
    if 0.15 < lost <= 0.17:
        statuses = [(AckStatus.READ, delivered_at)]  # delivered and sent callbacks lost, read arrived
    if rng.random() < 0.02:
        statuses.append((AckStatus.FAILED, sent_at + rng.randint(50, 400)))
    for status, platform_ts in statuses:
        received = platform_ts + rng.randint(1, 300)
        out.acks.append(
            Ack(room_id=room, message_id=name, platform=platform, platform_message_id=pmid, status=status,
                platform_ts_ms=platform_ts, received_at_ms=received)
        )  # fmt: skip
    first_ack = min((ts for s, ts in statuses if s != AckStatus.FAILED), default=None)
    if mode != OrderingMode.ACK.value:
        event(EventType.SENT, sent_at + rng.randint(0, 2), sent_at_ms=sent_at, platform_message_id=pmid)
        gap = {"none": 0, "fixed-delay": 200, "partition": rng.randint(0, 800)}[mode]
        return sent_at + gap + rng.randint(1, 20)
    timeout = 2500
    if first_ack is not None and first_ack + 300 < sent_at + timeout and rng.random() < 0.9:
        acked = first_ack + rng.randint(1, 300)
        event(EventType.ACKED, acked, sent_at_ms=sent_at, acked_at_ms=acked, platform_message_id=pmid)
        return acked + rng.randint(0, 5)
    ended = sent_at + timeout
    event(EventType.ACK_TIMEOUT, ended, sent_at_ms=sent_at, platform_message_id=pmid)
    if first_ack is not None:
        event(EventType.LATE_ACK, ended + rng.randint(1, 500), acked_at_ms=ended, platform_message_id=pmid)
    return ended + rng.randint(0, 5)


def split_statuses(acks: list[Ack]) -> tuple[list[Ack], list[Ack]]:
    """``acks`` as the webhook splits them between the acks and the statuses topics (docs/webhook.md): a message's
    first status received (its deciding one) and every watermark on acks; its later statuses, and every status of
    Instagram (whose send answer is the ack), on statuses."""
    on_acks: list[Ack] = []
    on_statuses: list[Ack] = []
    decided: set[tuple[str, str]] = set()
    for ack in sorted(acks, key=lambda a: a.received_at_ms):
        key = (ack.platform, ack.platform_message_id)
        if ack.watermark_ms is None and (ack.platform == "instagram" or key in decided):
            on_statuses.append(ack)
        else:
            on_acks.append(ack)
            decided.add(key)
    return on_acks, on_statuses
