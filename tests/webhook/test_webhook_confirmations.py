"""Waiting for Kafka's confirmations: one countdown per request, one timer for every request's deadline."""

from __future__ import annotations

import asyncio
import time

import pytest

from inturn.errors import KafkaClientError
from inturn_webhook.confirmations import Confirmation, Deadlines, KafkaNotConfirmedError


def _records(count: int) -> list[asyncio.Future[str]]:
    loop = asyncio.get_running_loop()
    return [loop.create_future() for _ in range(count)]


def _watched(deadlines: Deadlines, records: list[asyncio.Future[str]], timeout: float) -> Confirmation:
    confirmation = Confirmation(asyncio.get_running_loop(), timeout)
    for record in records:
        confirmation.track(record)
    deadlines.watch(confirmation)
    return confirmation


async def test_a_request_returns_once_every_record_is_confirmed_and_not_before() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    records = _records(3)
    confirmation = _watched(deadlines, records, timeout=30)
    waiting = asyncio.ensure_future(confirmation.wait())
    for record in records[:2]:
        record.set_result("ok")
    await asyncio.sleep(0)  # one pass of the loop: the two done-callbacks run (FIFO), then this task
    assert confirmation.waiting
    assert not waiting.done()
    records[2].set_result("ok")
    await asyncio.wait_for(waiting, 5)
    deadlines.close()


async def test_a_refused_record_ends_the_wait_at_once_with_kafkas_reason() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    records = _records(2)
    confirmation = _watched(deadlines, records, timeout=30)
    records[0].set_exception(KafkaClientError("Broker: Message size too large"))
    started = time.monotonic()
    with pytest.raises(KafkaNotConfirmedError, match="Kafka refused a record: Broker: Message size too large") as err:
        await confirmation.wait()
    assert time.monotonic() - started < 5  # not the 30 s deadline
    assert isinstance(err.value.__cause__, KafkaClientError)
    deadlines.close()


async def test_requests_past_their_deadline_are_refused_in_order_and_a_confirmed_one_between_them_is_not() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    first = _watched(deadlines, _records(2), timeout=0.05)
    confirmed_records = _records(1)
    confirmed = _watched(deadlines, confirmed_records, timeout=0.05)
    last = _watched(deadlines, _records(1), timeout=0.05)
    confirmed_records[0].set_result("ok")
    await confirmed.wait()
    # The first request's expiry must re-arm the timer for the last one, past the confirmed one between them.
    with pytest.raises(KafkaNotConfirmedError, match=r"2 of 2 records not confirmed in 0.05s"):
        await asyncio.wait_for(first.wait(), 5)
    with pytest.raises(KafkaNotConfirmedError, match=r"1 of 1 records not confirmed in 0.05s"):
        await asyncio.wait_for(last.wait(), 5)


async def test_a_record_confirmed_after_its_request_expired_changes_nothing() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    records = _records(1)
    confirmation = _watched(deadlines, records, timeout=0.01)
    with pytest.raises(KafkaNotConfirmedError):
        await asyncio.wait_for(confirmation.wait(), 5)
    records[0].set_result("late")
    confirmation.settled(records[0])  # what its done-callback does: must not raise (InvalidStateError)
    assert not confirmation.waiting


async def test_closing_the_deadlines_refuses_every_request_still_waiting() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    confirmation = _watched(deadlines, _records(1), timeout=30)
    deadlines.close()
    with pytest.raises(KafkaNotConfirmedError, match="1 of 1 records not confirmed"):
        await confirmation.wait()


async def test_a_request_with_nothing_to_confirm_is_not_waiting() -> None:
    confirmation = Confirmation(asyncio.get_running_loop(), 30)
    assert not confirmation.waiting
