"""A partition assigned again with no revoke or loss in between never has two senders of a room in one process.

The group is not expected to assign a member a partition it still holds, but nothing in the worker relied on that:
``Partitions.assign`` replaced the held ``Partition`` with a fresh one, and the old one's rooms, never told, went on
sending beside the new one's, which reads the partition again from its committed offset. The old assignment is now
let go as if lost (fenced, its room loops ended) before the new one starts (docs/reliability.md, problem 12).
"""

from __future__ import annotations

import asyncio
import time
from typing import cast

import pytest
import structlog
from confluent_kafka import Consumer, TopicPartition
from structlog.testing import capture_logs

import inturn_worker.rebalance
from inturn.schemas import Message, encode, now_ms
from inturn.settings.worker import WorkerSettings
from inturn_devtools.waiting import eventually
from inturn_worker.ack_reader import AckReader
from inturn_worker.acks import AckRouter
from inturn_worker.checkpoint import Checkpoint
from inturn_worker.dead_letters import DeadLetters
from inturn_worker.partition import Entry, Partition, Partitions
from inturn_worker.rebalance import Rebalances
from inturn_worker.room import Delivery, Rooms
from tests.worker.test_room_state_machine import MemoryStore, Platform, Recorder


@pytest.fixture(autouse=True)
def fresh_logger(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rebalance module's logger, not yet bound (a logger bound before another test re-configured structlog
    would log past ``capture_logs``)."""
    monkeypatch.setattr(inturn_worker.rebalance, "log", structlog.get_logger("inturn.worker.intake"))


class Acks:
    """The acks reader: every partition's acks read up to its assignment at once."""

    def assign(self, parts: list[Partition], since_ms: int) -> None:
        for part in parts:
            part.acks_caught_up()

    def unassign(self, parts: list[Partition]) -> None:
        pass


class Rounds:
    """The checkpoint: each round claims epoch 1 and renews the lease of the partitions it is given."""

    def __init__(self) -> None:
        self.wanted = asyncio.Event()

    async def once(self, only: list[Partition] | None = None) -> dict[int, int]:
        for part in only or []:
            part.claimed(1)
            part.durable([], 0, time.monotonic())  # a lease, as a checkpoint round grants one
        return {}


class GroupConsumer:
    """What ``on_assign`` asks of the consumer."""

    def resume(self, partitions: list[TopicPartition]) -> None:
        pass


def _consume(parts: Partitions, rooms: Rooms, offset: int) -> Partition:
    msg = Message(room_id="R", message_id=f"m{offset}", platform="whatsapp", recipient="r", payload={}, created_at_ms=0)
    part = parts[0]
    part.consumed(offset)
    part.cursor_loaded("R", -1, None)
    rooms.enqueue(Entry.of(part, offset, encode(msg), msg, now_ms()))
    return part


async def test_a_partition_assigned_again_while_held_stops_the_old_assignments_rooms_first() -> None:
    settings = WorkerSettings(worker_ack_timeout_ms=3_600_000, worker_adaptive_timeout=False)
    parts = Partitions(lease_s=3600)
    platform, recorder = Platform(), Recorder()
    delivery = Delivery(
        settings, {platform.name: platform}, recorder, AckRouter(3600), DeadLetters(settings, recorder, MemoryStore())
    )
    rooms = Rooms(settings, parts, delivery)
    rebalances = Rebalances(settings, parts, rooms, cast(AckReader, Acks()), cast(Checkpoint, Rounds()))
    rebalances.bind(asyncio.get_running_loop())
    consumer = cast(Consumer, GroupConsumer())
    assign = [TopicPartition("messages", 0)]

    await asyncio.to_thread(rebalances.on_assign, consumer, assign)
    old = _consume(parts, rooms, 0)
    await eventually(lambda: platform.pending is not None, 5, "m0 on its way (old assignment)")

    with capture_logs() as logs:
        await asyncio.to_thread(rebalances.on_assign, consumer, assign)  # again, with no revoke or loss before
    new = parts[0]
    assert new is not old
    assert old.fenced, "the old assignment's partition still sends"
    assert not old.rooms, "the old assignment's rooms were not ended"
    assert {"event": "partitions_assigned_again", "partitions": [0], "log_level": "warning"} in logs

    _consume(parts, rooms, 0)  # the new assignment reads again from the committed offset
    await eventually(lambda: platform.pending is not None, 5, "m0 on its way (new assignment)")
    assert platform.max_concurrent == 1, "two sends of room R at once in one process"
    assert platform.pending is not None
    assert platform.pending[0] == "m0"
    await rooms.close()
