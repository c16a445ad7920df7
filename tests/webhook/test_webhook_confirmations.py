"""Waiting for Kafka's confirmations: one countdown per request, one timer for every request's deadline."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import KafkaError, Message

from inturn.deadlines import COMPACT_MIN, Deadlines
from inturn.errors import KafkaClientError
from inturn_webhook.confirmations import Confirmation, KafkaNotConfirmedError


def _watched(deadlines: Deadlines, records: int, timeout: float) -> Confirmation:
    """A request waiting for ``records`` delivery reports, its deadline watched."""
    confirmation = Confirmation(asyncio.get_running_loop(), timeout)
    for _ in range(records):
        confirmation.expect()
    confirmation.watch(deadlines)
    return confirmation


async def test_a_request_returns_once_every_record_is_confirmed_and_not_before() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    confirmation = _watched(deadlines, 3, timeout=30)
    waiting = asyncio.ensure_future(confirmation.wait())
    confirmation.delivered(None, Message())
    confirmation.delivered(None, Message())
    await asyncio.sleep(0)  # one pass of the loop: the waiting task runs if it was woken
    assert confirmation.waiting
    assert not waiting.done()
    confirmation.delivered(None, Message())
    await asyncio.wait_for(waiting, 5)
    deadlines.close()


async def test_a_refused_record_ends_the_wait_at_once_with_kafkas_reason() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    confirmation = _watched(deadlines, 2, timeout=30)
    confirmation.delivered(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), Message())
    started = time.monotonic()
    refused = r"Kafka refused a record: .*Broker: Message size too large"
    with pytest.raises(KafkaNotConfirmedError, match=refused) as err:
        await confirmation.wait()
    assert time.monotonic() - started < 5  # not the 30 s deadline
    assert isinstance(err.value.__cause__, KafkaClientError)
    assert err.value.__cause__.code == KafkaError.MSG_SIZE_TOO_LARGE
    deadlines.close()


async def test_requests_past_their_deadline_are_refused_in_order_and_a_confirmed_one_between_them_is_not() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    first = _watched(deadlines, 2, timeout=0.05)
    confirmed = _watched(deadlines, 1, timeout=0.05)
    last = _watched(deadlines, 1, timeout=0.05)
    confirmed.delivered(None, Message())
    await confirmed.wait()
    # The first request's expiry must re-arm the timer for the last one, past the confirmed one between them.
    with pytest.raises(KafkaNotConfirmedError, match=r"2 of 2 records not confirmed in 0.05s"):
        await asyncio.wait_for(first.wait(), 5)
    with pytest.raises(KafkaNotConfirmedError, match=r"1 of 1 records not confirmed in 0.05s"):
        await asyncio.wait_for(last.wait(), 5)


async def test_a_record_confirmed_after_its_request_expired_changes_nothing() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    confirmation = _watched(deadlines, 1, timeout=0.01)
    with pytest.raises(KafkaNotConfirmedError):
        await asyncio.wait_for(confirmation.wait(), 5)
    confirmation.delivered(None, Message())  # the late report: must not raise (InvalidStateError)
    assert not confirmation.waiting


async def test_closing_the_deadlines_refuses_every_request_still_waiting() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    confirmation = _watched(deadlines, 1, timeout=30)
    deadlines.close(expire=True)
    with pytest.raises(KafkaNotConfirmedError, match="1 of 1 records not confirmed"):
        await confirmation.wait()


async def test_a_request_with_nothing_to_confirm_is_not_waiting() -> None:
    confirmation = Confirmation(asyncio.get_running_loop(), 30)
    assert not confirmation.waiting


async def test_requests_confirmed_in_time_do_not_stay_queued_until_the_timer() -> None:
    """A confirmed request lets go of its place at once, not a whole timeout later: the queue holds about the
    requests still waiting, not every request of the last timeout."""
    deadlines = Deadlines(asyncio.get_running_loop())
    stuck = _watched(deadlines, 1, timeout=30)  # one waiting at the front does not keep the confirmed behind it
    for _ in range(10 * COMPACT_MIN):
        _watched(deadlines, 1, timeout=30).delivered(None, Message())
    assert len(deadlines) < 2 * COMPACT_MIN
    assert stuck.waiting
    deadlines.close(expire=True)
    with pytest.raises(KafkaNotConfirmedError):
        await stuck.wait()
