"""What the worker logs about a message names the message: room, message id, partition and offset are bound in
the room's task for each message it delivers, and in the acks reader for each ack it routes (``inturn.logs.bind_work``,
merged into every event by ``inturn.logs.merge_work``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

import inturn_worker.ack_reader
import inturn_worker.dead_letters
from inturn.logs import bind_work, clear_work, configure, merge_work, work
from inturn.schemas import AckStatus, encode, now_ms
from inturn.settings.worker import WorkerSettings
from inturn_devtools.waiting import eventually
from inturn_worker.ack_reader import AckReader
from inturn_worker.acks import AckRouter
from inturn_worker.partition import Entry, Partition
from tests.support.messages import ack, text_message
from tests.worker.test_prepare_ahead import Counting
from tests.worker.test_room_state_machine import Recorder, rooms_of


@pytest.fixture(autouse=True)
def fresh_loggers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The modules' loggers, not yet bound: a logger caches its processors on first use, so one bound before
    another test re-configured structlog would log past ``capture_logs``."""
    monkeypatch.setattr(inturn_worker.dead_letters, "log", structlog.get_logger("inturn.worker.room"))
    monkeypatch.setattr(inturn_worker.ack_reader, "log", structlog.get_logger("inturn.worker.acks"))
    clear_work()
    yield
    clear_work()


class _Record:
    """The parts of a consumed acks record the reader reads."""

    def __init__(self, value: bytes, partition: int, offset: int) -> None:
        self._value, self._partition, self._offset = value, partition, offset

    def headers(self) -> None:
        return None

    def key(self) -> bytes:
        return b"R"

    def value(self) -> bytes:
        return self._value

    def topic(self) -> str:
        return "inturn.acks"

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def error(self) -> None:
        return None


def _named(event: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {key: event.get(key) for key in keys}


async def test_a_dead_letter_logged_in_a_rooms_send_path_names_its_message() -> None:
    platform = Counting(refuse_head=True)  # m0 cannot be rendered: it is dead-lettered
    part = Partition(3, lease_s=60)
    part.claimed(1)
    part.durable([], 0, time.monotonic())  # a lease, as a checkpoint round grants one
    part.acks_caught_up()
    rooms = rooms_of(WorkerSettings(), part, platform, Recorder(), AckRouter(60))
    message = text_message("R", "m0", recipient="r")
    with capture_logs(processors=[merge_work]) as logs:
        part.consumed(7)
        rooms.enqueue(Entry.of(part, 7, encode(message), message, now_ms()))
        await eventually(lambda: any(e["event"] == "dead_lettered" for e in logs), 5, "m0 dead-lettered", every=0)
    [event] = [e for e in logs if e["event"] == "dead_lettered"]
    assert _named(event, "room_id", "message_id", "partition", "offset", "log_level") == {
        "room_id": "R",
        "message_id": "m0",
        "partition": 3,
        "offset": 7,
        "log_level": "warning",
    }
    assert work() == {}, "bound in the room's task, not in the task that enqueued"
    await rooms.close()


async def test_an_undecodable_ack_is_logged_with_where_it_was_read() -> None:
    reader = AckReader(WorkerSettings(), AckRouter(early_ttl_s=60), Recorder())
    try:
        with capture_logs(processors=[merge_work]) as logs:
            reader._route(_Record(b"{not json", partition=2, offset=41))
        [event] = [e for e in logs if e["event"] == "ack_undecodable"]
        assert _named(event, "partition", "ack_offset", "room_id", "log_level") == {
            "partition": 2,
            "ack_offset": 41,
            "room_id": None,
            "log_level": "warning",
        }
    finally:
        await reader.close()


async def test_a_routed_ack_binds_its_room_and_message_for_what_is_logged_while_it_is_routed() -> None:
    reader = AckReader(WorkerSettings(), AckRouter(early_ttl_s=60), Recorder())
    delivered = ack("R9", "m5", "wamid.5", AckStatus.DELIVERED)
    try:
        reader._route(_Record(encode(delivered), partition=1, offset=12))
        assert _named(work(), "room_id", "message_id", "partition", "ack_offset") == {
            "room_id": "R9",
            "message_id": "m5",
            "partition": 1,
            "ack_offset": 12,
        }
    finally:
        await reader.close()


def test_a_json_log_line_carries_the_unit_of_work_and_its_own_keys_win() -> None:
    configure("json", "INFO")  # as a service on no terminal; its processors are run by hand below, so no logger
    try:  # is bound to this configuration (a cached one would outlive the test)
        processors = structlog.get_config()["processors"]
    finally:
        configure("console", "INFO")  # as tests/conftest.py left it

    def line(event: str, **keys: object) -> dict[str, Any]:
        event_dict: Any = {"event": event, **keys}
        for processor in processors[:-1]:
            event_dict = processor(None, "info", event_dict)
        rendered = processors[-1](None, "info", event_dict)
        assert isinstance(rendered, str)
        decoded: dict[str, Any] = json.loads(rendered)
        return decoded

    bind_work(room_id="R1", message_id="m1", partition=0, offset=5)
    sent = line("sent", offset=6)
    clear_work()
    idle = line("idle")
    assert _named(sent, "event", "room_id", "message_id", "partition", "offset") == {
        "event": "sent",
        "room_id": "R1",
        "message_id": "m1",
        "partition": 0,
        "offset": 6,
    }
    assert "room_id" not in idle
