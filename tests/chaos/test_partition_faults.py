"""The fault matrix, partition rows: a process keeps running while its path to Kafka, PostgreSQL or the platform
is blackholed (tests/support/proxy.py: connections stay open, nothing moves through them).

Each worker sends under its own simulator path (``/_via/<worker>``), so the receipt log says which worker sent
each message and when the platform accepted it: the Kafka row measures, from the log alone, that the cut-off
worker's last send comes before the first send of its partitions by the worker that takes them over.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from inturn.kafka import partition_for
from inturn.settings import KafkaSettings
from inturn_devtools import LocalKafka
from inturn_devtools.pipeline import Pipeline
from inturn_devtools.process import free_port
from inturn_devtools.waiting import wait_until
from tests.chaos import conftest as chaos
from tests.support.proxy import TcpProxy

pytestmark = [pytest.mark.chaos, pytest.mark.kafka, pytest.mark.postgres]

ROOMS, PER_ROOM = 300, 15  # 1000 rooms overloaded the simulator on this shared box (test_platform_faults.py)
CUT_S = 10.0  # how long a path stays blackholed where it heals: the scenario itself, not a wait for a condition
LEASE_S = 3.0  # the workers' lease: half their 6 s session timeout (inturn_worker.partition.lease_seconds)


@pytest.fixture
def proxied_kafka() -> Iterator[tuple[LocalKafka, TcpProxy]]:
    """A broker of this test's own with a second listener advertised at a proxy's port, and that proxy."""
    port = free_port()
    broker = LocalKafka(proxied_port=port).start(timeout=300)  # a loaded box starts Java slowly
    assert broker.proxied_listener_port is not None
    proxy = TcpProxy(broker.proxied_listener_port, port=port).start()
    try:
        yield broker, proxy
    finally:
        proxy.stop()
        broker.cleanup()


@pytest.fixture
def proxied_line(
    proxied_kafka: tuple[LocalKafka, TcpProxy], kafka_settings: KafkaSettings, postgres_dsn: str, tmp_path: Path,
    test_id: str,
) -> tuple[Pipeline, TcpProxy]:  # fmt: skip
    """A line (not started) on fresh topics of the proxied broker, and the proxy its clients can be pointed at."""
    broker, proxy = proxied_kafka
    settings = chaos.topics_on(broker, kafka_settings)
    return Pipeline(
        settings, postgres_dsn, tmp_path, group=f"g{test_id}", sim=chaos.CHAOS_SIM, worker=chaos.PLATFORM_WORKER
    ), proxy


def via(line: Pipeline, name: str, base: str | None = None) -> dict[str, str]:
    """A worker's environment for sending under ``/_via/<name>`` (through ``base``, default the simulator)."""
    return {"INTURN_WHATSAPP_BASE_URL": f"{base or line.sim_url}/_via/{name}"}


@contextmanager
def running(line: Pipeline, w1_env: dict[str, str], *, webhook_env: dict[str, str] | None = None) -> Iterator[Pipeline]:
    """Simulator, webhook and workers w1 (with ``w1_env``) and w2, the group settled; stopped afterwards."""
    try:
        line.start_sim()
        line.start_webhook(**(webhook_env or {}))
        line.add_worker("w1", **{**via(line, "w1"), **w1_env})
        line.add_worker("w2", **via(line, "w2"))
        line.wait_balanced()
        yield line
    finally:
        line.stop()


def sends(receipts: list[dict[str, Any]], worker: str, partitions: set[int], count: int) -> list[int]:
    """Acceptance times (ms) of ``worker``'s sends to rooms of ``partitions``, in order."""
    return sorted(
        r["accepted_at_ms"]
        for r in receipts
        if r.get("via") == worker and partition_for(r["room_id"], count) in partitions
    )


@pytest.mark.timeout(600)
def test_a_worker_cut_off_from_kafka_stops_sending_before_another_takes_its_partitions(
    proxied_line: tuple[Pipeline, TcpProxy], postgres_dsn: str
) -> None:
    line, proxy = proxied_line
    topic, count = line.topics.topic_messages, line.topics.topic_partitions
    with running(line, {"INTURN_KAFKA_BOOTSTRAP": proxy.address}):
        total = line.produce(rooms=ROOMS, per_room=PER_ROOM)
        scenario = chaos.Scenario(
            "worker cut off from Kafka (blackholed, kept running)", line, f"{ROOMS} rooms x {PER_ROOM}"
        )
        chaos.progress(scenario, 0.25, total)
        moved = chaos.owned_partitions(postgres_dsn, topic, "w1")
        proxy.blackhole()
        assert proxy.cut_at is not None
        cut_ms = int(proxy.cut_at * 1000)
        rooms = chaos.rooms_of(moved, ROOMS, count)
        scenario.fault(f"w1's path to Kafka blackholed, owning partitions {sorted(moved)}", len(rooms), rooms)
        wait_until(
            lambda: chaos.owned_partitions(postgres_dsn, topic, "w2") == set(range(count)),
            120,
            "w2 claimed every partition",
            every=0.5,
        )
        scenario.wait_drained(total, 240)
        chaos.judge(scenario)
        receipts = line.receipts()
        gaps = []
        for partition in sorted(moved):
            last_w1 = max((t for t in sends(receipts, "w1", {partition}, count) if t >= cut_ms - 60_000), default=None)
            first_w2 = min((t for t in sends(receipts, "w2", {partition}, count) if t >= cut_ms), default=None)
            assert first_w2 is not None, f"w2 never sent for partition {partition}"
            gaps.append((partition, last_w1, first_w2))
            w1_text = f"{(last_w1 - cut_ms) / 1000:.2f} s after the cut" if last_w1 else "none in the last minute"
            print(
                f"chaos:   partition {partition}: w1's last send {w1_text}, "
                f"w2's first send {(first_w2 - cut_ms) / 1000:.2f} s after the cut"
            )
        w1_after_cut = [t for t in sends(receipts, "w1", set(range(count)), count) if t >= cut_ms]
        last_ms = max(w1_after_cut, default=cut_ms) - cut_ms
        print(f"chaos:   w1 sends after the cut: {len(w1_after_cut)}, the last {last_ms} ms in")
        proxy.heal()
    for partition, last_w1, first_w2 in gaps:
        assert last_w1 is None or last_w1 < first_w2, f"partition {partition}: w1 still sent after w2 began"
    assert w1_after_cut == [] or max(w1_after_cut) < min(g[2] for g in gaps)


@pytest.mark.timeout(600)
def test_a_worker_cut_off_from_postgres_stops_within_its_lease_and_resumes(
    inturn_topics: KafkaSettings, postgres_dsn: str, tmp_path: Path, test_id: str
) -> None:
    target = urllib.parse.urlsplit(postgres_dsn)
    assert target.port is not None
    with TcpProxy(target.port) as proxy:
        proxied = target._replace(netloc=target.netloc.replace(f":{target.port}", f":{proxy.port}")).geturl()
        line = Pipeline(
            inturn_topics,
            postgres_dsn,
            tmp_path,
            group=f"g{test_id}",
            sim=chaos.CHAOS_SIM,
            worker=chaos.PLATFORM_WORKER,
        )
        with running(line, {"INTURN_POSTGRES_DSN": proxied}):
            total = line.produce(rooms=ROOMS, per_room=PER_ROOM)
            scenario = chaos.Scenario(
                "worker cut off from PostgreSQL (blackholed 10 s)", line, f"{ROOMS} rooms x {PER_ROOM}"
            )
            chaos.progress(scenario, 0.25, total)
            proxy.blackhole()
            assert proxy.cut_at is not None
            cut_ms = int(proxy.cut_at * 1000)
            scenario.fault("w1's path to PostgreSQL blackholed", 0)  # no owner changes: nothing may be re-sent
            time.sleep(CUT_S)
            healed_ms = time.time_ns() // 1_000_000
            proxy.heal(reset=False)  # the partition heals: what was held moves on, as TCP would retransmit it
            scenario.fault(f"healed after {CUT_S:g} s", 0)
            scenario.wait_drained(total, 240)
            chaos.judge(scenario)
            receipts = line.receipts()
    count = inturn_topics.topic_partitions
    w1_cut = [t for t in sends(receipts, "w1", set(range(count)), count) if cut_ms <= t < healed_ms]
    w2_cut = [t for t in sends(receipts, "w2", set(range(count)), count) if cut_ms <= t < healed_ms]
    w1_after = [t for t in sends(receipts, "w1", set(range(count)), count) if t >= healed_ms]
    last = (max(w1_cut) - cut_ms) / 1000 if w1_cut else 0.0
    print(
        f"chaos:   w1: {len(w1_cut)} sends during the cut, the last {last:.2f} s in; {len(w1_after)} after the heal "
        f"(first {(min(w1_after) - healed_ms) / 1000 if w1_after else float('nan'):.2f} s after); w2 during the cut: "
        f"{len(w2_cut)}"
    )
    assert last <= LEASE_S + 3.0, "w1 kept sending past its lease (3 s, plus 3 s for a loaded box)"
    assert w2_cut, "w2 stopped too"


@pytest.mark.timeout(600)
def test_a_worker_cut_off_from_the_platform_resends_at_most_what_was_in_flight(
    inturn_topics: KafkaSettings, postgres_dsn: str, tmp_path: Path, test_id: str
) -> None:
    line = Pipeline(
        inturn_topics, postgres_dsn, tmp_path, group=f"g{test_id}", sim=chaos.CHAOS_SIM, worker=chaos.PLATFORM_WORKER
    )
    with TcpProxy(line.sim_port) as proxy, running(line, via(line, "w1", f"http://{proxy.address}")):
        total = line.produce(rooms=ROOMS, per_room=PER_ROOM)
        scenario = chaos.Scenario(
            "worker cut off from the platform (blackholed 10 s)", line, f"{ROOMS} rooms x {PER_ROOM}"
        )
        chaos.progress(scenario, 0.25, total)
        owned = chaos.owned_partitions(postgres_dsn, inturn_topics.topic_messages, "w1")
        rooms = chaos.rooms_of(owned, ROOMS, inturn_topics.topic_partitions)
        proxy.blackhole()
        # A send the platform accepted whose answer was held may be sent again: 1 per room of w1's partitions.
        scenario.fault(f"w1's path to the platform blackholed, owning partitions {sorted(owned)}", len(rooms), rooms)
        time.sleep(CUT_S)
        proxy.heal(reset=True)  # the connections that lived through it are gone, as their timeouts would end them
        scenario.fault(f"healed after {CUT_S:g} s, its connections reset", 0)
        scenario.wait_drained(total, 240)
        chaos.judge(scenario)


@pytest.mark.timeout(600)
def test_the_webhook_cut_off_from_kafka_mid_request_loses_and_reorders_nothing(
    proxied_line: tuple[Pipeline, TcpProxy],
) -> None:
    line, proxy = proxied_line
    with running(line, {}, webhook_env={"INTURN_KAFKA_BOOTSTRAP": proxy.address}):
        total = line.produce(rooms=ROOMS, per_room=PER_ROOM)
        scenario = chaos.Scenario("webhook cut off from Kafka (blackholed 10 s)", line, f"{ROOMS} rooms x {PER_ROOM}")
        chaos.progress(scenario, 0.25, total)
        proxy.blackhole()
        scenario.fault("the webhook's path to Kafka blackholed with callbacks in flight", 0)  # acks only: no re-send
        time.sleep(CUT_S)
        proxy.heal(reset=False)
        scenario.fault(f"healed after {CUT_S:g} s", 0)
        scenario.wait_drained(total, 240)
        chaos.judge(scenario)
        stats = line.stats()
    print(
        f"chaos:   callback retries {stats['callback_retries']}, statuses given up {stats['callbacks_failed']} "
        "(their messages ended by ack timeout)"
    )
