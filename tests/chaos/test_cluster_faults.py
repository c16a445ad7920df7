"""The fault matrix, Kafka-cluster rows: a replicated cluster loses a partition leader, a broker, and is rolled.

The cluster is ``LocalKafka(brokers=3)``: three brokers and a controller of their own (separate controller
quorum), topics with replication factor 3, ``min.insync.replicas`` 2 and unclean leader election off, every
producer ``acks=all``. One cluster serves the module (starting three JVMs takes minutes on a loaded box);
each row gets its own topics and group and starts with every broker up and every replica in sync.

Each row runs the pipeline under load in ack mode, judges the simulator's receipt log and asserts the
matrix's targets: 0 lost, 0 reordered (stale re-sends included), at most 1 duplicate per room per fault
that may cost a re-send; the rolling restart allows none.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from inturn import topics
from inturn.kafka import make_admin
from inturn.settings import KafkaSettings
from inturn_devtools import LocalKafka
from inturn_devtools.pipeline import Pipeline
from inturn_devtools.waiting import wait_until
from tests.chaos.conftest import CHAOS_SIM, CHAOS_WORKER, Scenario, assert_target, progress

pytestmark = [pytest.mark.chaos, pytest.mark.kafka, pytest.mark.postgres]

ROOMS, PER_ROOM = 1000, 6
DOWN_S = 60.0  # how long one broker stays away in the ISR row: the scenario itself, not a wait for a condition


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalKafka]:
    """Three brokers and their controller, for this module's rows."""
    with LocalKafka(brokers=3) as kafka:
        yield kafka


@pytest.fixture
def healthy(cluster: LocalKafka) -> LocalKafka:
    """The cluster with every broker running and every replica in sync (a row before may have left one away)."""
    for node_id, node in cluster.nodes.items():
        if not node.running:
            cluster.start_broker(node_id, timeout=300)
    cluster.wait_in_sync(timeout=240)
    return cluster


@pytest.fixture
def cluster_topics(healthy: LocalKafka, test_id: str) -> KafkaSettings:
    """This row's four topics on the cluster, replication factor 3 (``min.insync.replicas`` 2), created."""
    settings = KafkaSettings(
        kafka_bootstrap=healthy.bootstrap, topic_partitions=4, topic_replication=3, **topics.prefixed(f"t{test_id}")
    )
    topics.create(make_admin(settings), settings, timeout=120)
    healthy.wait_in_sync(topics.topic_names(settings), timeout=120)
    return settings


@pytest.fixture
def cluster_line(cluster_topics: KafkaSettings, postgres_dsn: str, tmp_path: Path, test_id: str) -> Iterator[Pipeline]:
    """Simulator, webhook and two workers on the cluster, the group settled; stopped afterwards."""
    line = Pipeline(cluster_topics, postgres_dsn, tmp_path, group=f"g{test_id}", sim=CHAOS_SIM, worker=CHAOS_WORKER)
    try:
        line.start_sim()
        line.start_webhook()
        for name in ("w1", "w2"):
            line.add_worker(name)
        line.wait_balanced(within=180)
        yield line
    finally:
        line.stop()


def crashed_workers(line: Pipeline) -> list[str]:
    """Workers whose log shows an exception that ended them."""
    return sorted(name for name, w in line.workers.items() if "Traceback" in w.log_file.read_text())


@pytest.mark.timeout(900)
@pytest.mark.parametrize("which", ["messages", "acks", "events"])
def test_kill_9_of_a_partition_leader_loses_and_reorders_nothing(
    healthy: LocalKafka, cluster_line: Pipeline, which: str
) -> None:
    cluster, line = healthy, cluster_line
    topic = {
        "messages": line.topics.topic_messages,
        "acks": line.topics.topic_acks,
        "events": line.topics.topic_events,
    }[which]
    total = line.produce(rooms=ROOMS, per_room=PER_ROOM)
    scenario = Scenario(f"kill -9 the leader of a {which} partition", line, f"{ROOMS} rooms x {PER_ROOM}, 2 workers")
    progress(scenario, 0.25, total, within=240)
    victim = cluster.leader(topic, 0)
    cluster.kill_broker(victim)
    killed = time.monotonic()
    # Any room may have had a message in flight whose write or read went through the victim: 1 re-send per room.
    scenario.fault(f"kill -9 broker {victim}, leader of {which}/0 (and of its other partitions)", ROOMS)
    successor = cluster.leader(topic, 0, timeout=120)
    elected_s = time.monotonic() - killed
    wait_until(
        lambda: victim not in cluster.partition_state(topic, 0)[2],
        120,
        f"broker {victim} out of {which}/0's ISR",
        every=0.5,
        ignore=(KafkaException, KeyError),
    )
    isr_down = cluster.partition_state(topic, 0)[2]
    progress(scenario, 0.6, total, within=240)
    cluster.start_broker(victim, timeout=300)
    scenario.fault(f"broker {victim} started again with its data", 0)
    scenario.wait_drained(total, 420)
    report = scenario.verdict()
    cluster.wait_in_sync([topic], timeout=240)
    print(
        f"chaos:   {which}/0: leader {victim} -> {successor} in {elected_s:.1f} s, ISR while away {sorted(isr_down)}, "
        f"back in sync {sorted(cluster.partition_state(topic, 0)[2])}; workers that crashed: {crashed_workers(line)}"
    )
    assert successor != victim
    assert crashed_workers(line) == []
    assert_target(scenario, report)


@pytest.mark.timeout(900)
def test_one_broker_down_60_s_shrinks_and_grows_the_in_sync_replicas_and_loses_nothing(
    healthy: LocalKafka, cluster_line: Pipeline
) -> None:
    cluster, line = healthy, cluster_line
    names = topics.topic_names(line.topics)
    total = line.produce(rooms=ROOMS, per_room=PER_ROOM)
    scenario = Scenario(
        f"one broker down {DOWN_S:.0f} s (ISR shrinks, grows back)", line, f"2 x {ROOMS} rooms x {PER_ROOM}, 2 workers"
    )
    progress(scenario, 0.25, total, within=240)
    victim = cluster.leader(line.topics.topic_messages, 0)
    cluster.stop_broker(victim)
    away_since = time.monotonic()
    scenario.fault(f"broker {victim} stopped (SIGTERM, controlled shutdown), {DOWN_S:.0f} s away", ROOMS)

    def shrunk() -> bool:
        return all(victim not in isr for name in names for isr in cluster.in_sync(name, 4).values())

    wait_until(shrunk, 120, f"broker {victim} out of every ISR", every=0.5, ignore=(KafkaException, KeyError))
    shrunk_s = time.monotonic() - away_since
    isr_away = cluster.in_sync(line.topics.topic_messages, 4)
    # Writes go on with 2 of 3 replicas in sync (min.insync.replicas 2): a second batch, new rooms, while it is away.
    total += line.produce(rooms=ROOMS, per_room=PER_ROOM, prefix="later")
    scenario.fault(f"{ROOMS * PER_ROOM} more messages produced (acks=all) while broker {victim} is away", 0)
    wait_until(lambda: time.monotonic() - away_since >= DOWN_S, DOWN_S + 5, "the outage's length", every=0.5)
    stalled_at = scenario.delivered()
    cluster.start_broker(victim, timeout=300)
    scenario.fault(f"broker {victim} started again with its data", 0)
    back = time.monotonic()
    cluster.wait_in_sync(names, timeout=300)
    grown_s = time.monotonic() - back
    scenario.wait_drained(total, 420)
    report = scenario.verdict()
    print(
        f"chaos:   broker {victim} out of every ISR {shrunk_s:.1f} s after its stop ({line.topics.topic_messages}: "
        f"{isr_away}); back in every ISR {grown_s:.1f} s after its start; {stalled_at} of {total} delivered "
        f"at the restart; workers that crashed: {crashed_workers(line)}"
    )
    assert all(len(isr) == 2 for isr in isr_away.values()), isr_away
    assert all(sorted(isr) == [1, 2, 3] for isr in cluster.in_sync(line.topics.topic_messages, 4).values())
    assert crashed_workers(line) == []
    assert_target(scenario, report)


@pytest.mark.timeout(1200)
def test_a_rolling_restart_of_three_brokers_loses_and_duplicates_nothing(
    healthy: LocalKafka, cluster_line: Pipeline
) -> None:
    cluster, line = healthy, cluster_line
    names = topics.topic_names(line.topics)
    scenario = Scenario("rolling restart of three brokers", line, f"3 x {ROOMS} rooms x {PER_ROOM}, 2 workers")
    total = 0
    away: list[float] = []
    for node_id in cluster.nodes:
        # A batch of new rooms per broker, so each restart lands on a pipeline under load.
        total += line.produce(rooms=ROOMS, per_room=PER_ROOM, prefix=f"roll{node_id}")
        progress(scenario, 0.1 + 0.3 * (node_id - 1), total, within=240)
        stopped = time.monotonic()
        cluster.stop_broker(node_id)
        cluster.start_broker(node_id, timeout=300)
        away.append(time.monotonic() - stopped)
        # A controlled shutdown hands every leadership over before the broker goes: nothing is re-sent.
        scenario.fault(f"broker {node_id} restarted (SIGTERM, start), {away[-1]:.0f} s away", 0)
        cluster.wait_in_sync(names, timeout=300)
    scenario.wait_drained(total, 420)
    report = scenario.verdict()
    print(f"chaos:   each broker away {[round(a, 1) for a in away]} s; workers that crashed: {crashed_workers(line)}")
    assert crashed_workers(line) == []
    assert_target(scenario, report)
    assert report.duplicated == 0, report.summary()


def acked_and_read(bootstrap: str, topic: str, count: int, start: int) -> int:
    """Produce ``count`` records (``acks=all``) to ``topic``; returns how many the cluster acknowledged."""
    acked: list[int] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            acked.append(1)

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 15000}
    )
    for n in range(start, start + count):
        producer.produce(topic, value=str(n).encode(), on_delivery=on_delivery)
    producer.flush(30)
    return len(acked)


def readable(bootstrap: str, topic: str) -> int:
    """Records readable from ``topic``/0 (its high watermark)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "count"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1])
    finally:
        consumer.close()


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("min_insync", "unclean"), [(2, False), (1, True)], ids=["min-insync-2", "control-1-unclean"])
def test_what_min_insync_replicas_2_protects_when_the_leader_dies_alone_in_sync(
    healthy: LocalKafka, test_id: str, min_insync: int, unclean: bool
) -> None:
    """The control run: the followers go away, the leader takes writes alone if the topic lets it, then dies and
    the followers come back. With min.insync.replicas 1 and unclean election, a stale follower becomes leader
    and acknowledged writes are gone; with 2 (inturn's setting), those writes are refused, never acknowledged."""
    cluster = healthy
    topic = f"ctl{test_id}"
    admin = make_admin(KafkaSettings(kafka_bootstrap=cluster.bootstrap))
    config = {"min.insync.replicas": str(min_insync), "unclean.leader.election.enable": str(unclean).lower()}
    admin.create_topics([NewTopic(topic, 1, 3, config=config)])[topic].result(60)
    cluster.wait_in_sync([topic], timeout=120)
    before = acked_and_read(cluster.bootstrap, topic, 100, 0)
    leader = cluster.leader(topic, 0)
    followers = [n for n in cluster.nodes if n != leader]
    for node_id in followers:
        cluster.stop_broker(node_id)
    wait_until(
        lambda: cluster.partition_state(topic, 0)[2] == [leader],
        120,
        f"{topic}: the leader alone in sync",
        every=0.5,
        ignore=(KafkaException, KeyError),
    )
    alone = acked_and_read(cluster.bootstrap, topic, 100, 100)
    cluster.kill_broker(leader)
    for node_id in followers:
        cluster.start_broker(node_id, timeout=300)
    if unclean:
        new_leader = cluster.leader(topic, 0, timeout=120)
        assert new_leader != leader
    else:
        # No clean candidate: the partition waits for the leader, which comes back with every acknowledged write.
        cluster.start_broker(leader, timeout=300)
        cluster.leader(topic, 0, timeout=120)
    acknowledged, kept = before + alone, readable(cluster.bootstrap, topic)
    lost = max(0, acknowledged - kept)
    print(
        f"chaos: control min.insync.replicas={min_insync} unclean={unclean} | acknowledged {acknowledged} "
        f"({alone} while the leader was alone in sync) | readable after the failover {kept} | lost {lost}"
    )
    if min_insync == 2:
        assert alone == 0  # refused: NOT_ENOUGH_REPLICAS
        assert lost == 0
    else:
        assert alone == 100
        assert lost == alone  # the stale follower never had them
    if not cluster.nodes[leader].running:
        cluster.start_broker(leader, timeout=300)
    admin.delete_topics([topic])
