"""inturn's topics: create them, and check the layout the worker and webhook rely on.

Messages and acks must have the same partition count: the worker owning messages partition p
reads acks partition p (docs/architecture.md, invariant 5). ``check`` refuses a layout that breaks this.
The statuses topic (statuses that can no longer change an outcome, read by the nightly report only) may have any
partition count.

Durability: inturn's producers write with ``acks=all``, which means "every in-sync replica has it", and the in-sync
set may shrink to ``min.insync.replicas``. Topics are created with ``min.insync.replicas`` = replication factor - 1
(so 2 at a factor of 3: one broker may be down and writes go on, and an acknowledged write is on two brokers; 1 at a
factor of 1 or 2, where 2 would stop every write while one broker is down) and with unclean leader election off (an
out-of-sync replica never becomes leader, which would drop what it had not copied). ``findings`` says what, in a
topic's effective settings, could lose an acknowledged write.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TypedDict

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConfigResource, NewTopic, OffsetSpec, ResourceType

from inturn.errors import KafkaClientError, TopicMismatchError, TopicMissingError
from inturn.settings import KafkaSettings


@dataclass(frozen=True)
class TopicLayout:
    """Partition counts of inturn's topics as found on the cluster (None: missing)."""

    messages: int | None
    acks: int | None
    events: int | None
    dlq: int | None
    statuses: int | None = None


class TopicNames(TypedDict):
    """The five topic settings, as keyword arguments of ``KafkaSettings`` (and the settings built on it)."""

    topic_messages: str
    topic_acks: str
    topic_events: str
    topic_dlq: str
    topic_statuses: str


def prefixed(prefix: str) -> TopicNames:
    """The five topic settings of a set of topics of its own (``<prefix>.messages``, ``.acks``, ``.events``,
    ``.dlq``, ``.statuses``), for a test, a benchmark or a demo run: ``KafkaSettings(..., **prefixed("run1"))``."""
    return TopicNames(
        topic_messages=f"{prefix}.messages",
        topic_acks=f"{prefix}.acks",
        topic_events=f"{prefix}.events",
        topic_dlq=f"{prefix}.dlq",
        topic_statuses=f"{prefix}.statuses",
    )


def topic_names(settings: KafkaSettings) -> list[str]:
    """The five topics, in a fixed order: messages, acks, events, dead letters, statuses."""
    return [
        settings.topic_messages,
        settings.topic_acks,
        settings.topic_events,
        settings.topic_dlq,
        settings.topic_statuses,
    ]


def describe(admin: AdminClient, settings: KafkaSettings, timeout: float = 10.0) -> TopicLayout:
    """Partition counts of inturn's topics."""
    try:
        meta = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise KafkaClientError(exc.args[0]) from exc
    counts: list[int | None] = []
    for name in topic_names(settings):
        topic = meta.topics.get(name)
        counts.append(len(topic.partitions) if topic is not None and topic.error is None else None)
    return TopicLayout(*counts)


def min_insync_replicas(replication: int) -> int:
    """The ``min.insync.replicas`` inturn gives a topic of this replication factor: the factor - 1, at least 1
    (1 for a factor of 1 or 2, 2 for 3, 4 for 5)."""
    return max(1, replication - 1)


def durability_config(replication: int) -> dict[str, str]:
    """The topic settings that keep an acknowledged (``acks=all``) write: see the module's docstring."""
    return {
        "min.insync.replicas": str(min_insync_replicas(replication)),
        "unclean.leader.election.enable": "false",
    }


#: The acks topic's records carry the broker's time, not the webhook host's: a new owner of a partition finds the
#: acks published before its assignment with ``offsets_for_times`` on its own clock, and a webhook whose clock ran
#: minutes behind would have hidden them all (docs/reliability.md, the clock rows). The statuses topic too: the
#: nightly report selects both topics' records by that time, the same way.
ACKS_CONFIG = {"message.timestamp.type": "LogAppendTime"}


def partition_counts(settings: KafkaSettings) -> dict[str, int]:
    """Each of inturn's topics by name with the partitions it is created with: messages, acks and dead letters
    ``topic_partitions``; events and statuses their own count where one is set (0: the same)."""
    counts = dict.fromkeys(topic_names(settings), settings.topic_partitions)
    counts[settings.topic_events] = settings.topic_events_partitions or settings.topic_partitions
    counts[settings.topic_statuses] = settings.topic_statuses_partitions or settings.topic_partitions
    return counts


def create(admin: AdminClient, settings: KafkaSettings, timeout: float = 30.0) -> list[str]:
    """Create whichever of inturn's topics are missing, with ``durability_config``; returns the names created.
    The events and statuses topics may have fewer partitions than messages and acks (``partition_counts``).
    Idempotent: an existing topic is left as it is (``findings`` says what is wrong with it)."""
    layout = describe(admin, settings, timeout=min(timeout, 10.0))
    existing = dict(zip(topic_names(settings), _counts(layout), strict=True))
    config = {"retention.ms": str(settings.topic_retention_ms), **durability_config(settings.topic_replication)}
    counts = partition_counts(settings)
    new = [
        NewTopic(
            name,
            num_partitions=counts[name],
            replication_factor=settings.topic_replication,
            config={**config, **ACKS_CONFIG} if name in (settings.topic_acks, settings.topic_statuses) else config,
        )
        for name, count in existing.items()
        if count is None
    ]
    if not new:
        return []
    created = []
    for name, future in admin.create_topics(new, operation_timeout=timeout).items():
        try:
            future.result(timeout)
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() != 36:  # TOPIC_ALREADY_EXISTS: another process won the race, which is fine
                raise KafkaClientError(err) from exc
        else:
            created.append(name)
    wait_visible(admin, [t.topic for t in new], timeout)
    return created


def wait_visible(admin: AdminClient, names: list[str], timeout: float = 30.0) -> None:
    """Wait until every topic in ``names`` shows in the cluster's metadata with all its partitions led and
    serving offsets (a partition created a moment ago can be in metadata before its leader takes writes)."""
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(timeout=timeout)
        ready = all(
            (t := meta.topics.get(name)) is not None
            and t.error is None
            and t.partitions
            and all(p.leader >= 0 for p in t.partitions.values())
            for name in names
        )
        if ready and _serving(admin, meta, names):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics not visible after {timeout}s: {', '.join(names)}")
        time.sleep(0.05)


def _counts(layout: TopicLayout) -> list[int | None]:
    """The layout's partition counts in ``topic_names`` order."""
    return [layout.messages, layout.acks, layout.events, layout.dlq, layout.statuses]


def check(admin: AdminClient, settings: KafkaSettings, *, statuses: bool = False) -> TopicLayout:
    """Raise unless the four topics every service uses exist (and, with ``statuses``, the statuses topic: the
    webhook writes it when it keeps settled statuses off the acks topic) and messages and acks have equal
    partition counts."""
    layout = describe(admin, settings)
    names = topic_names(settings)
    missing = [
        name
        for name, count in zip(names, _counts(layout), strict=True)
        if count is None and (statuses or name != settings.topic_statuses)
    ]
    if missing:
        raise TopicMissingError(
            f"missing topics: {', '.join(missing)}; create them with `inturn topics create` "
            f"(partitions from INTURN_TOPIC_PARTITIONS)"
        )
    if layout.messages != layout.acks:
        smaller = settings.topic_acks if (layout.acks or 0) < (layout.messages or 0) else settings.topic_messages
        raise TopicMismatchError(
            f"{settings.topic_messages} has {layout.messages} partitions but {settings.topic_acks} has "
            f"{layout.acks}: acks would reach the wrong worker. Give both the same count, e.g. "
            f"`kafka-topics.sh --alter --topic {smaller} --partitions {max(layout.messages or 0, layout.acks or 0)}` "
            f"(adding partitions moves rooms between partitions: drain the workers first, see docs/operations.md)"
        )
    return layout


def _serving(admin: AdminClient, meta: ClusterMetadata, names: list[str]) -> bool:
    """Whether every partition of ``names`` answers an offsets request."""
    requests = {
        TopicPartition(name, p): OffsetSpec.latest()  # type: ignore[no-untyped-call]  # confluent-kafka's stub
        for name in names
        for p in meta.topics[name].partitions
    }
    try:
        for future in admin.list_offsets(requests, request_timeout=5).values():
            future.result(timeout=5)
    except KafkaException:
        return False
    return True


#: What each of the five topics is for, in ``topic_names`` order.
ROLES = ("messages", "acks", "events", "dlq", "statuses")


@dataclass(frozen=True)
class TopicState:
    """One of inturn's topics as the cluster has it: None where it does not exist (or did not say)."""

    role: str
    name: str
    partitions: int | None
    replication: int | None
    min_insync_replicas: int | None
    unclean_leader_election: bool | None


@dataclass(frozen=True)
class Finding:
    """Something about a topic that breaks inturn or could lose an acknowledged write, and what to do."""

    topic: str
    problem: str
    fix: str


def inspect(admin: AdminClient, settings: KafkaSettings, timeout: float = 10.0) -> list[TopicState]:
    """The five topics' partition counts, replication factors and effective durability settings (the topic's own
    value, else the broker's default, as the broker reports it)."""
    try:
        meta = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise KafkaClientError(exc.args[0]) from exc
    found = {name: meta.topics[name] for name in topic_names(settings) if name in meta.topics}
    found = {name: t for name, t in found.items() if t.error is None}
    configs: dict[str, dict[str, str]] = {}
    if found:
        resources = [ConfigResource(ResourceType.TOPIC, name) for name in found]
        try:
            for resource, future in admin.describe_configs(resources, request_timeout=timeout).items():
                entries = future.result(timeout)
                configs[resource.name] = {key: entry.value for key, entry in entries.items()}
        except KafkaException as exc:
            raise KafkaClientError(exc.args[0]) from exc
    states = []
    for role, name in zip(ROLES, topic_names(settings), strict=True):
        topic = found.get(name)
        if topic is None:
            states.append(TopicState(role, name, None, None, None, None))
            continue
        config = configs.get(name, {})
        replication = min((len(p.replicas) for p in topic.partitions.values()), default=None)
        isr = config.get("min.insync.replicas")
        unclean = config.get("unclean.leader.election.enable")
        states.append(
            TopicState(
                role,
                name,
                len(topic.partitions),
                replication,
                int(isr) if isr is not None else None,
                unclean.lower() == "true" if unclean is not None else None,
            )
        )
    return states


def findings(states: list[TopicState], production: bool) -> list[Finding]:
    """What is wrong with these topics: missing ones, messages and acks of different partition counts, and any
    setting under which a write Kafka acknowledged (``acks=all``) could still be lost (replication factor 1 or 2 in
    production, ``min.insync.replicas`` below 2 at a factor of 3 or more, unclean leader election on) or under which
    no write is accepted (``min.insync.replicas`` above the factor)."""
    found: list[Finding] = []
    by_role = {s.role: s for s in states}
    for state in states:
        found.extend(_topic_findings(state, production))
    messages, acks = by_role.get("messages"), by_role.get("acks")
    if messages and acks and messages.partitions and acks.partitions and messages.partitions != acks.partitions:
        smaller = acks if acks.partitions < messages.partitions else messages
        found.append(
            Finding(
                f"{messages.name},{acks.name}",
                f"{messages.name} has {messages.partitions} partitions but {acks.name} has {acks.partitions}: "
                "acks would reach the wrong worker",
                f"kafka-topics.sh --alter --topic {smaller.name} --partitions "
                f"{max(messages.partitions, acks.partitions)} (drain the workers first, docs/operations.md)",
            )
        )
    return found


def _topic_findings(state: TopicState, production: bool) -> list[Finding]:
    name = state.name
    if state.partitions is None:
        return [Finding(name, "topic missing", "inturn topics create")]
    alter = f"kafka-configs.sh --alter --entity-type topics --entity-name {name} --add-config"
    rf, isr = state.replication, state.min_insync_replicas
    found = []
    if rf is not None and production and rf < 3:
        found.append(
            Finding(
                name,
                f"replication factor {rf} in production: an acknowledged write may be on one broker only, and is "
                "lost with that broker's disk",
                "recreate the topic with INTURN_TOPIC_REPLICATION=3 (or reassign its partitions to 3 brokers)",
            )
        )
    if rf is not None and rf >= 3 and isr is not None and isr < 2:
        found.append(
            Finding(
                name,
                f"min.insync.replicas={isr} at replication factor {rf}: acks=all is satisfied by the leader alone, "
                "so an acknowledged write is lost if that broker fails before a follower copied it",
                f"{alter} min.insync.replicas={min_insync_replicas(rf)}",
            )
        )
    if rf is not None and isr is not None and isr > rf:
        found.append(
            Finding(
                name,
                f"min.insync.replicas={isr} above replication factor {rf}: every acks=all write is refused "
                "(NOT_ENOUGH_REPLICAS)",
                f"{alter} min.insync.replicas={min_insync_replicas(rf)}",
            )
        )
    if state.unclean_leader_election:
        found.append(
            Finding(
                name,
                "unclean.leader.election.enable=true: a replica that is not in sync may become leader and drop "
                "acknowledged writes it had not copied",
                f"{alter} unclean.leader.election.enable=false",
            )
        )
    return found
