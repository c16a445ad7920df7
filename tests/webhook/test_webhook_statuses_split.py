"""Which topic each status goes to: the acks topic while it may still decide a worker's outcome, the statuses topic
once it cannot (docs/webhook.md, Statuses off the workers' path). The rules run against a recording producer here;
``test_webhook_statuses_kafka.py`` runs them through real Kafka."""

from __future__ import annotations

import tracemalloc
from dataclasses import dataclass
from typing import cast

from confluent_kafka import KafkaError, Message, Producer

from inturn.kafka import AsyncProducer, Delivered, Headers
from inturn.settings.webhook import WebhookSettings
from inturn_webhook.intake import AckIntake, DecidedWindow
from inturn_webhook.statuses import Callback, Status

ACKS, STATUSES, DLQ = "t.acks", "t.statuses", "t.dlq"


@dataclass
class Produced:
    topic: str
    key: str | bytes | None
    headers: Headers | None
    partition: int
    delivered: Delivered


class RecordingProducer:
    """Stands in for confluent_kafka's ``Producer`` under a real ``AsyncProducer``: keeps every record and lets the
    test confirm or refuse it. Nothing stays queued, so the producer's poll timer has nothing to serve."""

    def __init__(self) -> None:
        self.records: list[Produced] = []

    def produce(
        self,
        topic: str,
        *,
        value: bytes,
        key: str | bytes | None,
        headers: Headers | None,
        partition: int,
        on_delivery: Delivered,
        timestamp: int = 0,
    ) -> None:
        self.records.append(Produced(topic, key, headers, partition, on_delivery))

    def poll(self, timeout: float) -> int:
        return 0

    def __len__(self) -> int:
        return 0

    def confirm_all(self) -> None:
        for record in self.records:
            record.delivered(None, cast(Message, None))

    def topics(self) -> list[str]:
        return [r.topic for r in self.records]


def _settings(**overrides: object) -> WebhookSettings:
    values: dict[str, object] = {"topic_acks": ACKS, "topic_statuses": STATUSES, "topic_dlq": DLQ, **overrides}
    return WebhookSettings(**values)  # type: ignore[arg-type]  # pydantic validates the values


def _status(pmid: str, status: str, *, room: str | None = "room-1", watermark_ms: int | None = None) -> Status:
    return Status(pmid, status, 1_700_000_000_000, "4917", room, f"m-{pmid}", None, {}, 3, watermark_ms)


async def _intake(**overrides: object) -> tuple[AckIntake, RecordingProducer]:
    producer = RecordingProducer()
    intake = AckIntake(AsyncProducer(cast(Producer, producer)), _settings(**overrides))
    return intake, producer


async def _submit(intake: AckIntake, producer: RecordingProducer, *statuses: Status, confirm: bool = True) -> list[str]:
    """The topics the statuses of one request went to (each confirmed by the fake Kafka when ``confirm``)."""
    before = len(producer.records)
    intake.submit("whatsapp", Callback(list(statuses)))
    new = producer.records[before:]
    if confirm:
        for record in new:
            record.delivered(None, cast(Message, None))
    return [r.topic for r in new]


async def test_a_message_s_first_status_goes_to_acks_and_its_later_ones_once_it_is_confirmed_to_statuses() -> None:
    intake, producer = await _intake()
    assert await _submit(intake, producer, _status("wamid.1", "sent")) == [ACKS]
    assert await _submit(intake, producer, _status("wamid.1", "delivered")) == [STATUSES]
    assert await _submit(intake, producer, _status("wamid.1", "read")) == [STATUSES]
    # A status after the deciding one, even "failed", cannot change the outcome the first status decided.
    assert await _submit(intake, producer, _status("wamid.1", "failed")) == [STATUSES]
    # Another message decides on its own.
    assert await _submit(intake, producer, _status("wamid.2", "delivered")) == [ACKS]
    statuses = [r for r in producer.records if r.topic == STATUSES]
    # Keyed by room (the report reads it by time, not by partition: -1 lets the partitioner choose), with the acks'
    # headers.
    assert {(r.key, r.partition) for r in statuses} == {("room-1", -1)}
    assert statuses[0].headers == [
        ("inturn-status", b"delivered"),
        ("inturn-platform-message-id", b"wamid.1"),
        ("inturn-message-id", b"m-wamid.1"),
    ]


async def test_a_later_status_goes_to_acks_while_the_deciding_one_is_unconfirmed_or_was_refused() -> None:
    intake, producer = await _intake()
    assert await _submit(intake, producer, _status("wamid.1", "sent"), confirm=False) == [ACKS]
    # Kafka has not confirmed "sent" yet: it might never land, so "delivered" may be the one that decides.
    assert await _submit(intake, producer, _status("wamid.1", "delivered"), confirm=False) == [ACKS]
    # Both statuses of one request: the first is not confirmed when the second is routed.
    assert await _submit(intake, producer, _status("wamid.2", "sent"), _status("wamid.2", "delivered")) == [ACKS, ACKS]
    refused = KafkaError(KafkaError._MSG_TIMED_OUT)
    producer.records[0].delivered(refused, cast(Message, None))
    assert ("whatsapp", "wamid.1") not in cast(DecidedWindow, intake.decided)
    assert await _submit(intake, producer, _status("wamid.1", "read")) == [ACKS]


async def test_a_watermark_always_goes_to_acks_it_may_resolve_whichever_message_it_covers() -> None:
    intake, producer = await _intake()
    mark = _status("watermark.4917.1700000000000", "delivered", watermark_ms=1_700_000_000_000)
    assert await _submit(intake, producer, mark) == [ACKS]
    later = _status("watermark.4917.1700000000000", "read", watermark_ms=1_700_000_000_000)
    assert await _submit(intake, producer, later) == [ACKS]
    assert len(cast(DecidedWindow, intake.decided)) == 0  # nothing to remember: no watermark decides a message


async def test_statuses_of_a_platform_whose_send_answer_is_the_ack_all_go_to_statuses() -> None:
    intake, producer = await _intake()
    intake.submit("instagram", Callback([_status("aWdfZAG1", "read")], answered_by_send=True))
    assert producer.topics() == [STATUSES]


async def test_a_status_of_an_unknown_room_is_dead_lettered_whatever_the_split() -> None:
    intake, producer = await _intake()
    intake.submit("instagram", Callback([_status("aWdfZAG1", "read", room=None)], answered_by_send=True))
    assert producer.topics() == [DLQ]


async def test_with_the_split_off_every_status_goes_to_acks() -> None:
    intake, producer = await _intake(webhook_statuses_split=False)
    assert intake.decided is None
    assert await _submit(intake, producer, _status("wamid.1", "sent")) == [ACKS]
    assert await _submit(intake, producer, _status("wamid.1", "delivered")) == [ACKS]
    intake.submit("instagram", Callback([_status("aWdfZAG1", "read")], answered_by_send=True))
    assert producer.topics()[-1] == ACKS


async def test_the_decided_window_forgets_the_oldest_message_beyond_its_size() -> None:
    intake, producer = await _intake(webhook_decided_window=2)
    for pmid in ("wamid.1", "wamid.2", "wamid.3"):
        assert await _submit(intake, producer, _status(pmid, "sent")) == [ACKS]
    window = cast(DecidedWindow, intake.decided)
    assert len(window) == 2
    # wamid.1 was forgotten: its later status goes to acks, as if another replica had decided it.
    assert await _submit(intake, producer, _status("wamid.1", "delivered")) == [ACKS]
    assert await _submit(intake, producer, _status("wamid.3", "delivered")) == [STATUSES]


def test_a_window_remembering_a_message_again_does_not_grow() -> None:
    window = DecidedWindow(3)
    for key in [("whatsapp", "a"), ("whatsapp", "b"), ("whatsapp", "a")]:
        window.remember(key)
    assert list(window.decided) == [("whatsapp", "a"), ("whatsapp", "b")]


def test_the_decided_window_holds_at_most_400_bytes_per_message() -> None:
    # The memory bound INTURN_WEBHOOK_DECIDED_WINDOW's description states (at most 400 bytes a message: 40 MB at the
    # default 100,000), with WhatsApp-sized platform message ids (the ids themselves counted), measured full and
    # turning over (every message remembered evicts the oldest).
    size = 20_000
    window = DecidedWindow(size)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(2 * size):  # each id a fresh string, as a parsed status carries, held by the window alone
            window.remember(("whatsapp", f"wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI{i:016d}QTFCQ0Y2RkQ2NTY2AA=="))
        used, peak = (value - before for value in tracemalloc.get_traced_memory())
    finally:
        tracemalloc.stop()
    assert len(window) == size
    assert used / size <= 400, f"{used / size:.0f} bytes per remembered message"
    assert peak / size <= 400, f"{peak / size:.0f} bytes per remembered message at the peak"
