"""Per-partition completion tracking: rooms finish out of offset order, commits must not overtake.

The committable offset of a partition is its lowest consumed offset that is not terminal yet
(or one past the highest consumed when all are terminal) — DESIGN.md, invariant 2.
"""

from __future__ import annotations

from collections import deque


class PartitionOffsets:
    """Consumed offsets of one partition, in consumption order, and which of them are terminal."""

    __slots__ = ("_done", "_next", "_pending", "committed")

    def __init__(self) -> None:
        self._pending: deque[int] = deque()
        self._done: set[int] = set()
        self._next: int | None = None  # one past the highest offset consumed
        self.committed: int | None = None  # the last offset committed to Kafka

    def consumed(self, offset: int) -> None:
        """Record a newly consumed offset (offsets of one partition arrive in increasing order)."""
        self._pending.append(offset)
        self._next = offset + 1

    def terminal(self, offset: int) -> None:
        """Record that ``offset`` reached its terminal outcome."""
        pending = self._pending
        if pending and pending[0] == offset:
            pending.popleft()
            done = self._done
            while pending and pending[0] in done:
                done.discard(pending.popleft())
        else:
            self._done.add(offset)

    @property
    def in_flight(self) -> int:
        """Consumed offsets not yet terminal (the partition's buffered messages)."""
        return len(self._pending) - len(self._done)

    def committable(self) -> int | None:
        """The offset to commit (Kafka's "next to read"), or None before anything was consumed."""
        if self._pending:
            return self._pending[0]
        return self._next

    def lag(self) -> int:
        """Consumed offsets the commit cannot pass yet."""
        first = self.committable()
        return 0 if first is None or self._next is None else self._next - first
