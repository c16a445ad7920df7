"""Statuses that can no longer change a message's outcome are skipped before they are decoded, when the ack record
carries the webhook's headers; records without them (an older webhook) are decoded and routed as before."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from inturn.platforms import SendResult
from inturn.schemas import Ack, AckStatus, decode, encode
from inturn.settings.worker import WorkerSettings
from inturn_worker.ack_reader import AckReader
from inturn_worker.acks import AckRouter
from tests.support.messages import ack
from tests.worker.harness import ack_headers
from tests.worker.test_room_state_machine import Recorder


class _Record:
    """The parts of a consumed Kafka record the acks reader reads."""

    def __init__(self, ack: Ack, headers: bool) -> None:
        self._ack = ack
        self._headers = ack_headers(ack) if headers else None

    def headers(self) -> list[tuple[str, str | bytes | None]] | None:
        return self._headers

    def key(self) -> bytes:
        return self._ack.room_id.encode()

    def value(self) -> bytes:
        return encode(self._ack)

    def topic(self) -> str:
        return "inturn.acks"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 0

    def error(self) -> None:
        return None


def _ack(n: int, status: AckStatus, echoed: bool = True) -> Ack:
    return ack("R", f"R#{n}" if echoed else None, f"wamid.{n}", status)


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[bytes | None]:
    """The ack values the reader decoded."""
    seen: list[bytes | None] = []

    def spy(cls: type[Ack], raw: bytes | None) -> Ack:
        seen.append(raw)
        return decode(cls, raw)

    monkeypatch.setattr("inturn_worker.ack_reader.decode", spy)
    return seen


def _duplicates() -> float:
    return REGISTRY.get_sample_value("inturn_worker_duplicate_acks_total", {"platform": "whatsapp"}) or 0.0


async def test_statuses_of_a_decided_message_are_counted_without_decoding_and_others_are_decoded(
    decoded: list[bytes | None],
) -> None:
    router = AckRouter(early_ttl_s=60)
    reader = AckReader(WorkerSettings(), router, Recorder())
    try:
        for n, timed_out in ((0, False), (1, True)):
            future = router.expect("R", f"R#{n}")
            router.sent("R", f"R#{n}", SendResult(f"wamid.{n}"))
            router.finish("R", f"R#{n}", f"wamid.{n}", timed_out=timed_out, partition=0, offset=n, platform="whatsapp")
            assert not future.done()
        before = _duplicates()

        # R#0 was acked: any further status of it changes nothing, by message id or by platform id alone.
        reader._route(_Record(_ack(0, AckStatus.DELIVERED), headers=True))
        reader._route(_Record(_ack(0, AckStatus.READ, echoed=False), headers=True))
        assert decoded == []
        assert _duplicates() == before + 2

        # The same status from an older webhook (no headers) is decoded, and found a duplicate all the same.
        reader._route(_Record(_ack(0, AckStatus.DELIVERED), headers=False))
        assert len(decoded) == 1
        assert _duplicates() == before + 3

        # R#1 timed out: its first status is a late ack to report (decoded), the next ones are skipped.
        reader._route(_Record(_ack(1, AckStatus.SENT), headers=True))
        assert len(decoded) == 2
        reader._route(_Record(_ack(1, AckStatus.DELIVERED), headers=True))
        assert len(decoded) == 2

        # A status of a message not decided yet (here: not even sent, an early ack) is decoded and kept.
        reader._route(_Record(_ack(2, AckStatus.SENT), headers=True))
        assert len(decoded) == 3
        early = router.expect("R", "R#2")
        assert early.done()
        result = early.result()
        assert result is not None
        assert result.status is AckStatus.SENT
    finally:
        reader._consumer.close()
        await asyncio.sleep(0)


async def test_a_status_after_the_one_that_resolved_a_waiting_message_is_skipped_before_its_outcome_is_recorded(
    decoded: list[bytes | None],
) -> None:
    """The first status resolves the message's ack future; the room records the outcome a moment later. A second
    status read in between (often in the same batch) cannot change the outcome either: it is counted, not decoded."""
    router = AckRouter(early_ttl_s=60)
    reader = AckReader(WorkerSettings(), router, Recorder())
    try:
        future = router.expect("R", "R#0")
        router.sent("R", "R#0", SendResult("wamid.0"))
        before = _duplicates()
        reader._route(_Record(_ack(0, AckStatus.SENT), headers=True))
        assert len(decoded) == 1
        assert future.done()
        reader._route(_Record(_ack(0, AckStatus.DELIVERED), headers=True))
        assert len(decoded) == 1
        assert _duplicates() == before + 1
        result = future.result()
        assert result is not None
        assert result.status is AckStatus.SENT  # the first status stays the one that resolved it

        # A message whose deadline passed (its future holds None) is not decided until its outcome is recorded:
        # a status then is decoded and routed.
        late = router.expect("R", "R#1")
        router.sent("R", "R#1", SendResult("wamid.1"))
        late.set_result(None)
        reader._route(_Record(_ack(1, AckStatus.SENT), headers=True))
        assert len(decoded) == 2
    finally:
        reader._consumer.close()
        await asyncio.sleep(0)
