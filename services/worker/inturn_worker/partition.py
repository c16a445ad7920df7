"""What the worker knows about one messages partition it owns: offsets, epoch, lease, cursors.

A partition may send only while it is owned (not revoked, lost or fenced), its lease is fresh, and
the acks reader has caught up with its acks partition:

- the lease is renewed by each successful checkpoint (events confirmed, cursors written under the
  partition's epoch), so a worker that was frozen, or cut off from PostgreSQL, stops sending before
  it could send something it cannot account for (DESIGN.md, invariant 4);
- acks published before the assignment (for messages the previous owner sent) are read before the
  first send, so a message acked under the previous owner is recognised and not sent again.
"""

from __future__ import annotations

import asyncio
import time

from inturn_worker.offsets import PartitionOffsets


class PartitionGone(Exception):
    """The partition was revoked, lost or fenced while a room of it was working."""


class PartitionState:
    """One assigned messages partition."""

    def __init__(self, partition: int, lease_s: float, durability_wanted: asyncio.Event | None = None) -> None:
        self.partition = partition
        self._durability_wanted = durability_wanted  # the checkpoint's: set, it runs a round at once
        self.offsets = PartitionOffsets()
        self.epoch: int | None = None
        self.revoked = False
        self.fenced = False
        self.paused = False
        self.cursors: dict[str, int] = {}
        self.lock = asyncio.Lock()  # one message in flight per partition ('partition' mode)
        self._lease_s = lease_s
        self._lease_until = 0.0
        self._renewed = asyncio.Event()
        self.acks_ready = False
        self.rounds_taken = 0  # checkpoint rounds that took this partition's cursor updates
        self.rounds_durable = 0  # the latest of those rounds that succeeded

    @property
    def gone(self) -> bool:
        """Revoked, lost or fenced: nothing more may be sent for it."""
        return self.revoked or self.fenced

    def renew(self, since: float | None = None) -> None:
        """A checkpoint under this partition's epoch succeeded; the lease counts from ``since``, when that round
        began (a round that straddled a freeze of this process must not grant a fresh lease afterwards)."""
        self._lease_until = (time.monotonic() if since is None else since) + self._lease_s
        self._renewed.set()
        self._renewed = asyncio.Event()

    def lease_valid(self) -> bool:
        """Whether the lease is fresh right now."""
        return time.monotonic() < self._lease_until

    def mark_acks_ready(self) -> None:
        """The acks reader has read this partition's acks up to the assignment."""
        self.acks_ready = True
        self.wake()

    def durable(self, taken: int, since: float) -> None:
        """The checkpoint round ``taken`` (which took this partition's updates), begun at ``since``, succeeded."""
        self.rounds_durable = max(self.rounds_durable, taken)
        self.renew(since)

    async def wait_durable(self) -> None:
        """Wait until every cursor update recorded so far is in PostgreSQL: the next checkpoint round, which is
        asked to begin as soon as the one under way (if any) is done."""
        target = self.rounds_taken + 1
        if self._durability_wanted is not None:
            self._durability_wanted.set()
        while self.rounds_durable < target:
            if self.gone:
                raise PartitionGone(self.partition)
            renewed = self._renewed
            try:
                await asyncio.wait_for(renewed.wait(), self._lease_s)
            except TimeoutError:
                continue

    def admitted(self) -> bool:
        """True when a send may go out now (``admit`` would return at once)."""
        return not self.gone and self.acks_ready and time.monotonic() < self._lease_until

    async def admit(self) -> None:
        """Return when a send may go out; raise ``PartitionGone`` once it never may."""
        while True:
            if self.gone:
                raise PartitionGone(self.partition)
            if self.acks_ready and time.monotonic() < self._lease_until:
                return
            renewed = self._renewed
            try:
                await asyncio.wait_for(renewed.wait(), self._lease_s)
            except TimeoutError:
                continue

    def wake(self) -> None:
        """Wake rooms waiting in ``admit`` (after a revoke or fence, so they see it at once)."""
        self._renewed.set()
        self._renewed = asyncio.Event()
