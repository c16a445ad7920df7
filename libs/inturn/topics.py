"""inturn's topics: create them, and check the layout the worker and webhook rely on.

Messages and acks must have the same partition count: the worker owning messages partition p
reads acks partition p (docs/architecture.md, invariant 5). ``check`` refuses a layout that breaks this.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TypedDict

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.admin._metadata import ClusterMetadata
from confluent_kafka.cimpl import NewTopic

from inturn.errors import KafkaClientError, TopicMismatchError, TopicMissingError
from inturn.settings import KafkaSettings


@dataclass(frozen=True)
class TopicLayout:
    """Partition counts of inturn's topics as found on the cluster (None: missing)."""

    messages: int | None
    acks: int | None
    events: int | None
    dlq: int | None


class TopicNames(TypedDict):
    """The four topic settings, as keyword arguments of ``KafkaSettings`` (and the settings built on it)."""

    topic_messages: str
    topic_acks: str
    topic_events: str
    topic_dlq: str


def prefixed(prefix: str) -> TopicNames:
    """The four topic settings of a set of topics of its own (``<prefix>.messages``, ``.acks``, ``.events``,
    ``.dlq``), for a test, a benchmark or a demo run: ``KafkaSettings(..., **prefixed("run1"))``."""
    return TopicNames(
        topic_messages=f"{prefix}.messages",
        topic_acks=f"{prefix}.acks",
        topic_events=f"{prefix}.events",
        topic_dlq=f"{prefix}.dlq",
    )


def topic_names(settings: KafkaSettings) -> list[str]:
    """The four topics, in a fixed order: messages, acks, events, dead letters."""
    return [settings.topic_messages, settings.topic_acks, settings.topic_events, settings.topic_dlq]


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


def create(admin: AdminClient, settings: KafkaSettings, timeout: float = 30.0) -> list[str]:
    """Create whichever of inturn's topics are missing; returns the names created. Idempotent."""
    layout = describe(admin, settings)
    existing = dict(zip(topic_names(settings), [layout.messages, layout.acks, layout.events, layout.dlq], strict=True))
    config = {"retention.ms": str(settings.topic_retention_ms)}
    new = [
        NewTopic(
            name,
            num_partitions=settings.topic_partitions,
            replication_factor=settings.topic_replication,
            config=config,
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


def check(admin: AdminClient, settings: KafkaSettings) -> TopicLayout:
    """Raise unless all four topics exist and messages and acks have equal partition counts."""
    layout = describe(admin, settings)
    missing = [
        name
        for name, count in zip(
            topic_names(settings), [layout.messages, layout.acks, layout.events, layout.dlq], strict=True
        )
        if count is None
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
