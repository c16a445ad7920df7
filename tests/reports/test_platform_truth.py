"""The report against the truth, per platform: one pipeline run judged by the simulator's receipt log.

One run of the whole pipeline (simulator, webhook, a worker in ``none`` mode, which sends a room's messages without
waiting, so they overtake each other on their way to the device) carries rooms of all five platforms the simulator
speaks at once, with the demo's platform (150 ms median latency, 12% of callbacks lost). The receipt log says what
reached each device in what order; the report runs on the same events and acks, read back from Kafka. Per platform:

- where the platform's callbacks can order messages (``measurable``), the report's out-of-order rate is within
  a stated tolerance of the log's (``RELATIVE_TOLERANCE``), and its device latency is there;
- elsewhere the report says "not measurable", with the reason, for the out-of-order rate (and the device latency),
  never 0, even where the log shows messages out of order (Messenger).

Why the two rates differ at all, and so why a tolerance (docs/reports.md, "What the report can see"): the log counts
a room's adjacent inversions in device order; the report compares each message with the previous one in room order
that has a device time, from the platform's own timestamps. A message whose callbacks were lost (12% here) takes
part in no pair, so some pairs span two sends; two messages with the same device time count as in order; and the
simulator times its ``delivered`` status when it issues it, after the ``sent`` callback, not at the receipt.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from inturn import topics
from inturn.kafka import committed_total, make_admin
from inturn.schemas import Ack, Event, decode, now_ms
from inturn.settings import KafkaSettings
from inturn_devtools import demo
from inturn_devtools.pipeline import PLATFORMS, Pipeline
from inturn_devtools.reading import TopicReader
from inturn_devtools.waiting import wait_until
from inturn_reports.job import compute_tables
from inturn_reports.transform import ReportParams
from inturn_reports.transform.measurable import not_measurable
from tests.reports.conftest import acks_frame, events_frame

#: A pipeline run and a Spark session: about a minute on a quiet box; far longer on a loaded one (the default 300 s
#: per test was taken by the Spark session's start alone at a load average of 45).
pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.postgres, pytest.mark.timeout(1200)]

#: Rooms per platform and messages per room: 280 adjacent pairs per platform, enough that the log shows some
#: out of order on every platform that delivers after a latency (16-20% in the runs measured).
ROOMS, PER_ROOM = 20, 15
#: The most the report's out-of-order rate may differ from the log's: a share of the log's rate (the sources below
#: grow with the disorder: two messages sharing a device time count as in order, and more inversions mean more such
#: ties), at least a few points. Measured gaps (2026-11-28): WhatsApp 0.3 points of 15.7% and Twilio 2.3 of 20.4% at
#: load 35-45; WhatsApp 6.1 points of 47.9% on a quieter box (more sends overtake); WhatsApp 4.8 of 29.2% at the
#: demo's scale (issue 39). None of them is a count the report could make and does not.
RELATIVE_TOLERANCE, LEAST_TOLERANCE = 0.2, 0.03
#: The least out-of-order share the log must show for the comparison to mean anything (a report reading 0 fails).
DISORDER = 0.05


@dataclass(frozen=True)
class Truth:
    """The run: the log's out-of-order share per platform, and the report's summary row per platform."""

    log_rate: dict[str, float]
    log_pairs: dict[str, int]
    summary: dict[str, dict[str, Any]]


def _platform(room: str) -> str:
    return room.split("-room-", 1)[0]


@pytest.fixture(scope="module")
def truth(
    spark: SparkSession, kafka_bootstrap: str, postgres_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Truth:
    settings = KafkaSettings(
        kafka_bootstrap=kafka_bootstrap, topic_partitions=4, **topics.prefixed(f"truth{uuid.uuid4().hex[:8]}")
    )
    topics.create(make_admin(settings), settings)
    workdir: Path = tmp_path_factory.mktemp("truth")
    line = Pipeline(
        settings,
        postgres_dsn,
        workdir,
        group=f"truth-{uuid.uuid4().hex[:8]}",
        sim={**demo.SIM, **demo.SIM_PER_PLATFORM["twilio"]},
        worker={**demo.WORKER, "INTURN_WORKER_MODE": "none"},
    )
    since = now_ms()
    try:
        line.start_sim()
        line.start_webhook()
        line.add_worker("truth-w1")
        total = sum(line.produce(ROOMS, PER_ROOM, prefix=f"{p}-room", platform=p) for p in PLATFORMS)

        def done() -> bool:
            received = {(r["room_id"], r["message_id"]) for r in line.receipts()}
            return len(received) >= total and committed_total(settings, line.group) >= total

        wait_until(done, 300, lambda: f"every message at the device: {line.report().summary()}", every=0.5)
        wait_until(lambda: line.stats()["pending"] == 0, 60, lambda: "nothing on its way to the device", every=0.5)
        verdict = line.report()
        # The statuses still being called back: read the acks until none came for 3 s (more than the simulator's
        # status chain of sent -> delivered takes once every message is at the device).
        acks = [decode(Ack, r.value) for r in TopicReader(settings, settings.topic_acks).settle(quiet=3, within=120)]
        events = [decode(Event, r.value) for r in TopicReader(settings, settings.topic_events).to_end()]
    finally:
        line.stop()
    until = now_ms() + 1
    reordered: dict[str, int] = dict.fromkeys(PLATFORMS, 0)
    pairs: dict[str, int] = dict.fromkeys(PLATFORMS, 0)
    for room, report in verdict.rooms.items():
        reordered[_platform(room)] += report.reordered
        pairs[_platform(room)] += max(0, report.produced - 1)
    assert verdict.lost == 0, verdict.summary()
    tables = compute_tables(events_frame(spark, events), acks_frame(spark, acks), ReportParams(since, until))
    rows = {row["platform"]: row for row in tables["summary"].to_pylist()}
    return Truth({p: reordered[p] / pairs[p] for p in PLATFORMS}, pairs, rows)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_report_says_what_the_receipt_log_says_or_that_it_cannot_see_it(truth: Truth, platform: str) -> None:
    row = truth.summary[platform]
    log_rate = truth.log_rate[platform]
    assert row["messages"] == ROOMS * PER_ROOM
    assert truth.log_pairs[platform] == ROOMS * (PER_ROOM - 1)
    reason = not_measurable(platform, "out_of_order")
    seen = f"report {row['out_of_order_rate']} ({row['inverted']}/{row['pairs']}), log {log_rate:.3f}"
    if reason is None:
        assert log_rate >= DISORDER, f"the run shows too little disorder to judge the report: {seen}"
        assert row["out_of_order_note"] is None
        assert row["out_of_order_rate"] is not None, seen
        assert abs(row["out_of_order_rate"] - log_rate) <= max(LEAST_TOLERANCE, RELATIVE_TOLERANCE * log_rate), seen
        # The device latency, from the platform's own times, is there and plausible: at least the simulator's
        # least latency, at most its cap plus the status chain.
        assert row["device_latency_note"] is None
        assert row["device_p50_ms"] is not None, row
        assert 10 <= row["device_p50_ms"] <= 5_000, row
    else:
        assert (row["pairs"], row["inverted"], row["out_of_order_rate"]) == (None, None, None), seen
        assert row["out_of_order_note"] == reason
        assert row["device_latency_note"] == not_measurable(platform, "device_latency") is not None
        assert (row["device_p50_ms"], row["device_p95_ms"], row["device_p99_ms"]) == (None, None, None)
        if platform == "messenger":  # out of order at the device, which the watermark cannot show
            assert log_rate >= DISORDER, seen
