"""The fault matrix, platform rows: the platform pushes back (429 storms, 5xx bursts), is late with its acks, and
calls back twice and out of order, while a run is in progress.

Each test is one scenario of docs/reliability.md; it prints a ``chaos:`` line and asserts the targets: 0 lost,
0 reordered, nothing unexpected, and no duplicates in any room (the simulator refuses a send it answers 429 or
5xx before accepting it, and a late or repeated callback must not make the worker send anything again).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from inturn.settings import KafkaSettings
from inturn_devtools.pipeline import Pipeline
from tests.chaos.conftest import CHAOS_SIM, PLATFORM_WORKER, Scenario, judge, progress, worker_counter

pytestmark = [pytest.mark.chaos, pytest.mark.kafka, pytest.mark.postgres]

SMALL_ROOMS = 300  # on this shared 2-core box (load 30-45) 1000 rooms kept the simulator answering sends after 30 s
BURST_S = 3.0
#: Three sending accounts (WhatsApp phone_number_ids); room r sends from ACCOUNTS[r % 3].
ACCOUNTS = ("100200301", "100200302", "100200303")


def post(line: Pipeline, path: str, body: dict[str, Any]) -> None:
    """POST a control call to the simulator (``/_sim/faults``, ``/_sim/config``)."""
    request = urllib.request.Request(  # noqa: S310 - loopback
        f"{line.sim_url}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - loopback
        answer.read()


@pytest.fixture
def platform_pipeline(
    inturn_topics: KafkaSettings, postgres_dsn: str, tmp_path: Path, test_id: str
) -> Iterator[Callable[..., Pipeline]]:
    """Starts simulator and webhook on this test's topics, the simulator with the row's own knobs
    (``INTURN_SIM_*`` keyword arguments over the matrix's platform), and two workers settled in the group."""
    lines: list[Pipeline] = []

    def start(webhook: dict[str, str] | None = None, **sim_knobs: str) -> Pipeline:
        sim = {**CHAOS_SIM, **sim_knobs}
        line = Pipeline(
            inturn_topics, postgres_dsn, tmp_path, group=f"g{test_id}", sim=sim, worker=PLATFORM_WORKER, webhook=webhook
        )
        lines.append(line)
        return line.start("w1", "w2")

    try:
        yield start
    finally:
        for line in lines:
            line.stop()


def drained_from_the_start(line: Pipeline, name: str, fault: str) -> Scenario:
    """A row whose fault is on from the first message: ``SMALL_ROOMS`` rooms x 10 produced, the fault recorded at
    the start (touching no room more than the rest), and the run waited out until every message is through."""
    per_room = 10
    total = line.produce(rooms=SMALL_ROOMS, per_room=per_room)
    scenario = Scenario(name, line, f"{SMALL_ROOMS} rooms x {per_room}, 2 workers")
    scenario.fault(fault, 0)
    scenario.wait_drained(total, 300)
    return scenario


def deliveries_by_account(
    receipts: list[dict[str, Any]], start_ms: int, end_ms: int, when: str = "delivered_at_ms"
) -> dict[str, int]:
    """First deliveries per sending account whose device time (``when``: or acceptance time) is in
    [start_ms, end_ms)."""
    counts = dict.fromkeys(ACCOUNTS, 0)
    for receipt in receipts:
        if not receipt["duplicate"] and start_ms <= receipt[when] < end_ms:
            counts[receipt["phone_number_id"]] = counts.get(receipt["phone_number_id"], 0) + 1
    return counts


@pytest.mark.timeout(600)
def test_a_429_storm_on_one_account_holds_it_back_while_the_other_accounts_keep_flowing(
    platform_pipeline: Callable[..., Pipeline],
) -> None:
    line = platform_pipeline()
    per_room, storm_s = 40, 8.0
    total = line.produce(rooms=SMALL_ROOMS, per_room=per_room, accounts=ACCOUNTS)
    scenario = Scenario(
        "429 storm on one of 3 accounts (Retry-After 2 s, 8 s)", line, f"{SMALL_ROOMS} rooms x {per_room}, 3 accounts"
    )
    progress(scenario, 0.2, total)
    stormy = ACCOUNTS[0]
    asked_ms = time.time_ns() // 1_000_000
    post(line, "/_sim/faults", {"account": stormy, "status": 429, "for_s": storm_s, "retry_after": 2})
    # The storm runs from when the simulator took the call (by its answer) until at least asked + storm_s.
    started_ms = time.time_ns() // 1_000_000
    scenario.fault(f"429 + Retry-After: 2 on every send of account {stormy} for {storm_s:g} s", 0)
    scenario.wait_drained(total, 300)
    judge(scenario)
    receipts = line.receipts()
    first_ms = min(r["delivered_at_ms"] for r in receipts)
    # Deliveries already on their way at the storm's start land within the simulator's latency cap (400 ms).
    settle_ms = 500
    before = deliveries_by_account(receipts, first_ms, started_ms)
    during = deliveries_by_account(receipts, started_ms + settle_ms, started_ms + int(storm_s * 1000))
    before_s, during_s = (started_ms - first_ms) / 1000, storm_s - settle_ms / 1000
    rates = {a: (before[a] / before_s, during[a] / during_s) for a in ACCOUNTS}
    print(
        "chaos:   first deliveries per second before / during the storm: "
        + ", ".join(f"{a} {b:.0f} / {d:.0f}" for a, (b, d) in rates.items())
    )
    stats = line.stats()
    print(f"chaos:   answered 429: {stats['rejected'].get('429', 0)}; retries by the workers: see their metrics")
    # The storm's account: nothing accepted while the storm surely ran.
    accepted = deliveries_by_account(receipts, started_ms, asked_ms + int(storm_s * 1000), "accepted_at_ms")
    print(f"chaos:   accepted during the storm: {accepted}")
    assert accepted[stormy] == 0, "the platform accepted sends of the storm's account during the storm"
    for account in ACCOUNTS[1:]:
        # The other accounts keep flowing: at least a third of their rate before the storm (the storm's rooms
        # take their share of the workers' buffers meanwhile, so some slow-down is allowed, a stall is not).
        assert rates[account][1] >= rates[account][0] / 3, rates
    assert stats["rejected"].get("429", 0) > 0


@pytest.mark.timeout(600)
def test_5xx_bursts_on_every_account_lose_reorder_and_duplicate_nothing(
    platform_pipeline: Callable[..., Pipeline],
) -> None:
    line = platform_pipeline()
    per_room = 20
    total = line.produce(rooms=SMALL_ROOMS, per_room=per_room, accounts=ACCOUNTS)
    scenario = Scenario("5xx bursts (500, 503, 500; 3 s each)", line, f"{SMALL_ROOMS} rooms x {per_room}, 3 accounts")
    for share, status in ((0.15, 500), (0.45, 503), (0.75, 500)):
        progress(scenario, share, total)
        post(line, "/_sim/faults", {"status": status, "for_s": BURST_S})
        scenario.fault(f"every send answered {status} for {BURST_S:g} s", 0)  # refused before acceptance: no re-send
        time.sleep(BURST_S)  # the burst itself: the next one starts after it, not a wait for a condition
    scenario.wait_drained(total, 300)
    judge(scenario)
    rejected = line.stats()["rejected"]
    print(f"chaos:   answered 500: {rejected.get('500', 0)}, 503: {rejected.get('503', 0)}")
    assert rejected.get("500", 0) > 0
    assert rejected.get("503", 0) > 0


@pytest.mark.timeout(600)
def test_acks_later_than_the_ack_timeout_and_acks_before_the_sends_answer_reorder_nothing(
    platform_pipeline: Callable[..., Pipeline],
) -> None:
    # Device latency stays below the ack timeout (1.5 s); the callbacks are late: median 200 ms, p99 3 s, up to 5 s.
    # 5% of sends are answered 1 s after acceptance: their acks come before the answer.
    line = platform_pipeline(
        INTURN_SIM_CALLBACK_DELAY_MEDIAN_MS="200",
        INTURN_SIM_CALLBACK_DELAY_P99_MS="3000",
        INTURN_SIM_CALLBACK_DELAY_MAX_MS="5000",
        INTURN_SIM_SLOW_RATE="0.05",
        INTURN_SIM_SLOW_MS="1000",
    )
    scenario = drained_from_the_start(
        line,
        "acks past the ack timeout (callback delay p99 3 s > 1.5 s) and before the send's answer (5% slow answers)",
        "late callbacks and slow answers from the start",
    )
    late, timeouts = (
        worker_counter(line, "inturn_worker_late_acks_total"),
        worker_counter(line, "inturn_worker_ack_timeouts_total"),
    )
    judge(scenario)
    stats = line.stats()
    print(
        f"chaos:   ack timeouts {timeouts:.0f}, late acks {late:.0f}, callbacks delayed {stats['callbacks_delayed']}, "
        f"slow answers {stats['slow_answers']}"
    )
    assert late > 0, "no ack arrived after its timeout: the row did not test late acks"
    assert stats["slow_answers"] > 0


@pytest.mark.timeout(600)
def test_callbacks_duplicated_and_reordered_by_the_platform_send_nothing_twice(
    platform_pipeline: Callable[..., Pipeline],
) -> None:
    # 30% of callback requests come again up to 3 s later (after the message's next status, often after its
    # room moved on); every status is delayed by up to 600 ms (p99), so callbacks of messages overtake each other.
    line = platform_pipeline(
        # Every status on the acks topic, as several webhook replicas would leave the duplicates (one replica keeps
        # a decided message's later statuses off it): the row tests the workers' handling of them.
        webhook={"INTURN_WEBHOOK_STATUSES_SPLIT": "false"},
        INTURN_SIM_CALLBACK_DUPLICATE_RATE="0.3",
        INTURN_SIM_CALLBACK_DUPLICATE_DELAY_MS="3000",
        INTURN_SIM_CALLBACK_DELAY_MEDIAN_MS="30",
        INTURN_SIM_CALLBACK_DELAY_P99_MS="600",
        INTURN_SIM_CALLBACK_DELAY_MAX_MS="1000",
    )
    scenario = drained_from_the_start(
        line,
        "callbacks duplicated (30% of requests, up to 3 s later) and reordered (delay p99 600 ms)",
        "duplicated and reordered callbacks from the start",
    )
    duplicate_acks = worker_counter(line, "inturn_worker_duplicate_acks_total")
    judge(scenario)
    stats = line.stats()
    print(f"chaos:   statuses called back twice {stats['callbacks_duplicated']}, duplicate acks {duplicate_acks:.0f}")
    assert stats["callbacks_duplicated"] > 0
    assert duplicate_acks > 0, "the workers saw no duplicate ack: the row did not test them"
