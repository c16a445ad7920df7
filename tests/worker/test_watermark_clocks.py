"""Messenger's watermark acks with the worker's clock two minutes apart from the platform's.

A watermark is the platform's time, a send's ``sent_at_ms`` the worker's. Compared as they are, a worker clock behind
the platform's lets the previous message's watermark (a duplicate or late delivery callback) resolve the message in
flight, which the platform has not delivered: the room sends the next one and the two may reach the device out of
order. A worker clock ahead never resolves a watermark-only delivery: every such message waits out its ack timeout.
The router learns the platform clock's lead from the deliveries that name a message by its mid
(``inturn.platforms.messenger.PlatformClock``) and compares on the platform's clock.
"""

from __future__ import annotations

import asyncio

import pytest

from inturn.platforms import SendResult
from inturn.platforms.messenger import PlatformClock
from inturn.schemas import Ack, AckStatus
from inturn_worker.acks import AckRouter, Routed

TWO_MINUTES_MS = 120_000


def _delivery(room: str, watermark_ms: int, mid: str | None = None) -> Ack:
    """What the webhook publishes for a Messenger delivery: one ack per mid, or one watermark-only ack."""
    return Ack(
        room_id=room,
        message_id=None,
        platform="messenger",
        platform_message_id=mid or f"watermark.{room}.{watermark_ms}",
        status=AckStatus.DELIVERED,
        platform_ts_ms=watermark_ms,
        received_at_ms=watermark_ms,
        watermark_ms=watermark_ms,
    )


def _in_flight(router: AckRouter, message_id: str, mid: str, sent_at_ms: int) -> asyncio.Future[Ack | None]:
    """``message_id`` of room R sent at ``sent_at_ms`` (the worker's clock), accepted as ``mid``."""
    future = router.expect("R", message_id)
    router.sent("R", message_id, SendResult(mid, sent_at_ms), by_watermark=True)
    return future


def _finish(router: AckRouter, message_id: str, mid: str) -> None:
    router.finish("R", message_id, mid, timed_out=False, partition=0, offset=0, platform="messenger")


@pytest.mark.parametrize("lead_ms", [TWO_MINUTES_MS, -TWO_MINUTES_MS], ids=["worker-behind", "worker-ahead"])
async def test_with_clocks_two_minutes_apart_only_a_watermark_after_the_send_resolves_it(lead_ms: int) -> None:
    """``lead_ms``: how far the platform's clock runs ahead of the worker's."""
    router = AckRouter(early_ttl_s=60)
    worker_t0 = 10_000_000
    # m0: sent at worker_t0, accepted 2 ms later on the platform; its delivery names it (mids) with that watermark.
    m0 = _in_flight(router, "m0", "mid.0", worker_t0)
    m0_watermark = worker_t0 + lead_ms + 2
    assert router.route(_delivery("R", m0_watermark, mid="mid.0"))[0] is Routed.RESOLVED
    assert m0.done()
    _finish(router, "m0", "mid.0")
    # m1 goes out 300 ms later. The platform calls m0's delivery back again, watermark only (a retried callback):
    # it is older than m1's send on the platform's clock, so m1 is still in flight.
    m1 = _in_flight(router, "m1", "mid.1", worker_t0 + 300)
    assert router.route(_delivery("R", m0_watermark))[0] is Routed.DUPLICATE
    assert not m1.done(), "m0's watermark resolved m1, which the platform has not delivered"
    # m1's own delivery, watermark only (Messenger leaves mids out at times): resolves it, whichever clock is ahead.
    assert router.route(_delivery("R", worker_t0 + 300 + lead_ms + 3))[0] is Routed.RESOLVED
    assert m1.done()


async def test_a_delivery_naming_the_message_resolves_it_whatever_the_clocks_say() -> None:
    router = AckRouter(early_ttl_s=60)
    m0 = _in_flight(router, "m0", "mid.0", sent_at_ms=10_000_000 + TWO_MINUTES_MS)  # worker two minutes ahead
    assert router.route(_delivery("R", 10_000_001, mid="mid.0"))[0] is Routed.RESOLVED
    assert m0.done()


async def test_a_mid_of_an_earlier_message_resolves_nothing_later() -> None:
    router = AckRouter(early_ttl_s=60)
    m0 = _in_flight(router, "m0", "mid.0", 10_000_000)
    router.route(_delivery("R", 10_000_000 + TWO_MINUTES_MS, mid="mid.0"))
    assert m0.done()
    _finish(router, "m0", "mid.0")
    m1 = _in_flight(router, "m1", "mid.1", 10_000_500)
    assert router.route(_delivery("R", 10_000_000 + TWO_MINUTES_MS, mid="mid.0"))[0] is Routed.DUPLICATE
    assert not m1.done()


def test_the_learned_lead_is_the_smallest_observed_and_follows_a_clock_step_within_two_windows() -> None:
    clock = PlatformClock(window=3)
    assert clock.lead_ms is None
    assert clock.covers(1_000, 1_000)  # nothing learned yet: the worker's clock is trusted
    for sent, watermark in [(1_000, 121_005), (2_000, 122_002), (3_000, 123_009)]:
        clock.observe(sent, watermark)
    assert clock.lead_ms == 120_002
    assert not clock.covers(4_000, 123_009)
    assert clock.covers(4_000, 124_002)
    # The platform's clock steps 10 s further ahead: the old, smaller lead is forgotten after the next full window.
    for n in range(6):
        clock.observe(10_000 + n, 10_000 + n + 130_004)
    assert clock.lead_ms == 130_004
    assert not clock.covers(None, 10**13)


async def test_a_watermark_the_early_lead_overstated_resolves_its_message_once_the_lead_falls() -> None:
    """The lead is learned as an upper bound: the first deliveries that name a mid may have taken 3 ms to be accepted,
    and a message accepted within the same millisecond it was sent (seen in CI: sent and accepted at the same ms)
    then gets a watermark-only delivery that does not cover it by that lead. It is kept, and resolves its message as
    soon as another room's delivery brings the lead down; the previous message's watermark never does."""
    router = AckRouter(early_ttl_s=60)
    t0 = 10_000_000
    first = router.expect("A", "a0")
    router.sent("A", "a0", SendResult("mid.a0", t0), by_watermark=True)
    assert router.route(_delivery("A", t0 + 3, mid="mid.a0"))[0] is Routed.RESOLVED  # lead learned: 3 ms
    assert first.done()
    router.finish("A", "a0", "mid.a0", timed_out=False, partition=0, offset=0, platform="messenger")
    # R: m0 delivered (watermark t0 + 100), then m1 sent at t0 + 200, accepted the same millisecond.
    m0 = _in_flight(router, "m0", "mid.0", t0 + 98)
    assert router.route(_delivery("R", t0 + 101, mid="mid.0"))[0] is Routed.RESOLVED
    assert m0.done()
    _finish(router, "m0", "mid.0")
    m1 = _in_flight(router, "m1", "mid.1", t0 + 200)
    router.route(_delivery("R", t0 + 101))  # m0's delivery again, watermark only
    router.route(_delivery("R", t0 + 200))  # m1's, watermark only: t0 + 200 + 3 > t0 + 200, not covered yet
    assert not m1.done()
    # Another room's delivery naming its mid, accepted within the millisecond: the lead falls to 0.
    b0 = router.expect("B", "b0")
    router.sent("B", "b0", SendResult("mid.b0", t0 + 300), by_watermark=True)
    assert router.route(_delivery("B", t0 + 300, mid="mid.b0"))[0] is Routed.RESOLVED
    assert b0.done()
    assert m1.done(), "m1's own watermark covers it at the true lead"
    ack = m1.result()
    assert ack is not None
    assert ack.watermark_ms == t0 + 200, "resolved by m1's watermark, not m0's"


async def test_a_kept_watermark_of_the_previous_message_does_not_resolve_when_the_lead_falls() -> None:
    router = AckRouter(early_ttl_s=60)
    t0 = 10_000_000
    m0 = _in_flight(router, "m0", "mid.0", t0)
    assert router.route(_delivery("R", t0 + 5, mid="mid.0"))[0] is Routed.RESOLVED  # lead learned: 5 ms
    assert m0.done()
    _finish(router, "m0", "mid.0")
    m1 = _in_flight(router, "m1", "mid.1", t0 + 10)
    router.route(_delivery("R", t0 + 6))  # a late watermark of m0 (accepted at t0 + 6 at most, before m1 left)
    b0 = router.expect("B", "b0")
    router.sent("B", "b0", SendResult("mid.b0", t0 + 20), by_watermark=True)
    assert router.route(_delivery("B", t0 + 21, mid="mid.b0"))[0] is Routed.RESOLVED  # lead 1 ms: t0 + 11 > t0 + 6
    assert b0.done()
    assert not m1.done(), "m0's watermark resolved m1"
