"""Ack futures: a room's loop waits on one; the acks reader resolves it.

An ack is matched by (room_id, message_id) when the platform echoed our callback data, else by
the platform message id the send returned. Early acks (before the send returned, or from a
previous owner of the room) are kept for a bounded time and matched when their message comes up;
late acks (after the message timed out) are reported once and never resolve anything else;
duplicates (a second status of a resolved message) are counted and dropped.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from enum import Enum

from inturn.schemas import Ack


class Routed(Enum):
    """What the router did with an ack."""

    RESOLVED = "resolved"
    EARLY = "early"
    LATE = "late"
    DUPLICATE = "duplicate"


@dataclass(slots=True)
class Finished:
    """A message that reached an outcome, remembered for classifying the acks that still come for it."""

    message_id: str
    timed_out: bool
    partition: int
    offset: int
    platform: str
    late_reported: bool = False


class AckRouter:
    """Matches acks to waiting messages; bounded memory for early and finished messages."""

    def __init__(self, early_ttl_s: float, finished_capacity: int = 200_000) -> None:
        self._early_ttl = early_ttl_s
        self._finished_capacity = finished_capacity
        self._waiting: dict[tuple[str, str], asyncio.Future[Ack | None]] = {}
        self._waiting_pmid: dict[str, tuple[str, str]] = {}
        self._early: dict[tuple[str, str], Ack] = {}
        self._early_pmid: dict[str, Ack] = {}
        self._early_expiry: deque[tuple[float, tuple[str, str] | None, str]] = deque()
        self._finished: OrderedDict[tuple[str, str], Finished] = OrderedDict()
        self._finished_pmid: dict[str, tuple[str, str]] = {}

    def expect(self, room_id: str, message_id: str) -> asyncio.Future[Ack | None]:
        """A future for this message's ack; already resolved when an early ack by message id is waiting."""
        key = (room_id, message_id)
        future: asyncio.Future[Ack | None] = asyncio.get_running_loop().create_future()
        early = self._early.pop(key, None)
        if early is not None:
            future.set_result(early)
        self._waiting[key] = future
        return future

    def sent(self, room_id: str, message_id: str, platform_message_id: str) -> None:
        """The send returned this platform id: match acks by it too, including one that came early."""
        key = (room_id, message_id)
        future = self._waiting.get(key)
        if future is None:
            return
        self._waiting_pmid[platform_message_id] = key
        early = self._early_pmid.pop(platform_message_id, None)
        if early is not None and not future.done():
            future.set_result(early)

    def finish(
        self,
        room_id: str,
        message_id: str,
        platform_message_id: str | None,
        *,
        timed_out: bool,
        partition: int,
        offset: int,
        platform: str,
    ) -> None:
        """The message reached its outcome: stop waiting, remember it for late and duplicate acks."""
        key = (room_id, message_id)
        self._waiting.pop(key, None)
        if platform_message_id is not None:
            self._waiting_pmid.pop(platform_message_id, None)
            self._finished_pmid[platform_message_id] = key
        self._finished[key] = Finished(message_id, timed_out, partition, offset, platform)
        if len(self._finished) > self._finished_capacity:
            self._finished.popitem(last=False)
            if len(self._finished_pmid) > 2 * self._finished_capacity:
                self._finished_pmid.clear()

    def settled(self, room_id: str, message_id: str | None, platform_message_id: str | None) -> Finished | None:
        """The finished message an ack is about, when nothing the ack says can change that message's outcome any
        more (it is decided, and a late ack for it was already reported); None when the ack must be routed."""
        key = (room_id, message_id) if message_id else self._finished_pmid.get(platform_message_id or "")
        if key is None or key in self._waiting:
            return None
        finished = self._finished.get(key)
        if finished is None or (finished.timed_out and not finished.late_reported):
            return None
        return finished

    def forget_partitions(self, partitions: set[int]) -> None:
        """These partitions are (re)assigned: forget the messages of theirs this worker finished before.

        A worker that lost a partition and gets it back re-reads its acks; an ack of a message it had seen
        acked, but whose cursor never reached PostgreSQL, is the only proof that the message is done, so it
        must wait as an early ack for that message to come up again, not be dropped as a duplicate.
        """
        for key in [k for k, f in self._finished.items() if f.partition in partitions]:
            del self._finished[key]

    def forget_room(self, room_id: str) -> None:
        """Drop waiting futures of a room whose partition was taken away (they are cancelled by the caller)."""
        for key in [k for k in self._waiting if k[0] == room_id]:
            del self._waiting[key]

    def route(self, ack: Ack) -> tuple[Routed, Finished | None]:
        """Resolve the waiting message this ack belongs to, or classify it (early, late, duplicate)."""
        key: tuple[str, str] | None = (ack.room_id, ack.message_id) if ack.message_id else None
        if key is None:
            key = self._waiting_pmid.get(ack.platform_message_id) or self._finished_pmid.get(ack.platform_message_id)
        if key is not None:
            future = self._waiting.get(key)
            if future is not None:
                if future.done():
                    return Routed.DUPLICATE, None
                future.set_result(ack)
                return Routed.RESOLVED, None
            finished = self._finished.get(key)
            if finished is not None:
                if finished.timed_out and not finished.late_reported:
                    finished.late_reported = True
                    return Routed.LATE, finished
                return Routed.DUPLICATE, finished
        self._keep_early(ack, key)
        return Routed.EARLY, None

    def _keep_early(self, ack: Ack, key: tuple[str, str] | None) -> None:
        now = time.monotonic()
        self._expire(now)
        if key is not None:
            self._early.setdefault(key, ack)
        else:
            self._early_pmid.setdefault(ack.platform_message_id, ack)
        self._early_expiry.append((now + self._early_ttl, key, ack.platform_message_id))

    def _expire(self, now: float) -> None:
        expiry = self._early_expiry
        while expiry and expiry[0][0] <= now:
            _, key, pmid = expiry.popleft()
            if key is not None:
                self._early.pop(key, None)
            else:
                self._early_pmid.pop(pmid, None)
