"""Early, late and duplicate acks; retries on 429 and 5xx; dead letters for permanent failures."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import asyncpg
import msgspec
import orjson
import pytest

from inturn.schemas import DeadLetter, EventType, decode
from inturn.settings import KafkaSettings
from inturn.settings.worker import WorkerSettings
from inturn_devtools.waiting import eventually
from tests.support.messages import text_message
from tests.worker.harness import (
    ScriptedPlatform,
    events,
    produce,
    produce_raw,
    read_topic,
    running_worker,
    terminal_by_message,
)

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


async def test_acks_that_arrive_before_the_send_returned_are_matched(
    inturn_topics: KafkaSettings, platform: ScriptedPlatform, make_settings: Callable[..., WorkerSettings]
) -> None:
    platform.behaviour["E"].early = True  # the ack is in Kafka before the send call returns
    produce(inturn_topics, [text_message("E", f"e{n}") for n in range(6)])
    settings = make_settings(worker_ack_timeout_ms=5000)
    async with running_worker(settings):
        terminal = terminal_by_message(await events(inturn_topics, expect_terminal=6))
    assert terminal == {f"e{n}": [EventType.ACKED] for n in range(6)}
    assert platform.order() == {"E": [f"e{n}" for n in range(6)]}


async def test_a_late_ack_is_recorded_and_never_releases_the_next_message(
    inturn_topics: KafkaSettings, platform: ScriptedPlatform, make_settings: Callable[..., WorkerSettings]
) -> None:
    platform.behaviour["L"].ack_delay_s = 1.5  # every ack comes after the 1 s timeout
    produce(inturn_topics, [text_message("L", f"l{n}") for n in range(3)])
    settings = make_settings(worker_ack_timeout_ms=1000)
    async with running_worker(settings):
        evts = await events(inturn_topics, expect_terminal=3)
        await eventually(lambda: len(platform.receipts) == 3, 20, "all sent")
        while sum(1 for e in evts if e.type is EventType.LATE_ACK) < 2:
            evts = await events(inturn_topics)
    terminal = terminal_by_message(evts)
    assert terminal == {f"l{n}": [EventType.ACK_TIMEOUT] for n in range(3)}
    late = [e.message_id for e in evts if e.type is EventType.LATE_ACK]
    assert late[:2] == ["l0", "l1"]
    at = [r.at for r in platform.receipts]
    # Each next send waited for the full timeout: the late ack (at +1.5 s) did not release anything early
    # and nothing was sent before the timeout (at +1.0 s).
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(at))


@pytest.mark.parametrize("headers", [True, False], ids=["ack-headers", "older-webhook"])
async def test_duplicate_acks_are_harmless(
    inturn_topics: KafkaSettings,
    platform: ScriptedPlatform,
    headers: bool,
    make_settings: Callable[..., WorkerSettings],
) -> None:
    platform.ack_headers = headers
    platform.behaviour["D"].duplicate = True
    produce(inturn_topics, [text_message("D", f"d{n}") for n in range(5)])
    settings = make_settings()
    async with running_worker(settings):
        terminal = terminal_by_message(await events(inturn_topics, expect_terminal=5))
    assert terminal == {f"d{n}": [EventType.ACKED] for n in range(5)}
    assert platform.order() == {"D": [f"d{n}" for n in range(5)]}
    assert platform.acks_published == 10


async def test_429_with_retry_after_is_honoured_and_5xx_is_retried_until_success(
    inturn_topics: KafkaSettings, platform: ScriptedPlatform, make_settings: Callable[..., WorkerSettings]
) -> None:
    platform.behaviour["T"].answers.extend([(429, "1"), (503, None), (500, None)])
    produce(inturn_topics, [text_message("T", "t0"), text_message("T", "t1")])
    settings = make_settings()
    async with running_worker(settings):
        evts = await events(inturn_topics, expect_terminal=2)
    assert terminal_by_message(evts) == {"t0": [EventType.ACKED], "t1": [EventType.ACKED]}
    assert [(mid, status) for mid, _, status in platform.attempts] == [
        ("t0", 429),
        ("t0", 503),
        ("t0", 500),
        ("t0", 200),
        ("t1", 200),
    ]
    first, second = platform.attempts[0][1], platform.attempts[1][1]
    assert second - first >= 1.0, "the retry after a 429 waited the Retry-After"
    retried = [e for e in evts if e.type is EventType.RETRIED]
    assert [e.attempt for e in retried] == [1, 2, 3]
    acked = next(e for e in evts if e.type is EventType.ACKED and e.message_id == "t0")
    assert acked.attempt == 4, "the terminal event says how many attempts the send took"
    assert acked.sent_at_ms is not None
    assert acked.sent_at_ms >= retried[-1].ts_ms


@pytest.mark.parametrize("policy", ["skip", "block"])
async def test_a_permanent_4xx_goes_to_the_dead_letter_topic_and_the_room_follows_its_policy(
    inturn_topics: KafkaSettings,
    pg_schema: str,
    platform: ScriptedPlatform,
    policy: str,
    make_settings: Callable[..., WorkerSettings],
) -> None:
    platform.behaviour["P"].answers.append((400, None))
    produce(inturn_topics, [text_message("P", "p0"), text_message("P", "p1"), text_message("Q", "q0")])
    settings = make_settings(worker_dead_letter_policy=policy)
    async with running_worker(settings):
        expected = 3 if policy == "skip" else 2
        evts = await events(inturn_topics, expect_terminal=expected)
        await eventually(lambda: len(platform.receipts) == expected - 1, 10, "sends done")
    terminal = terminal_by_message(evts)
    assert terminal["p0"] == [EventType.DEAD_LETTERED]
    assert terminal["q0"] == [EventType.ACKED]
    if policy == "skip":
        assert terminal["p1"] == [EventType.ACKED]
    else:
        assert "p1" not in terminal
        assert [r.message_id for r in platform.receipts] == ["q0"]
    letters = [decode(DeadLetter, v) for v in read_topic(inturn_topics, inturn_topics.topic_dlq, expect=1)]
    assert [(d.message_id, d.reason.split(":")[0]) for d in letters] == [("p0", "HTTP 400")]
    conn = await asyncpg.connect(pg_schema)
    try:
        rows = await conn.fetch("SELECT message_id, reason FROM dead_letters")
        blocked = await conn.fetch("SELECT room_id FROM blocked_rooms")
    finally:
        await conn.close()
    assert [(r["message_id"], r["reason"].split(":")[0]) for r in rows] == [("p0", "HTTP 400")]
    assert [r["room_id"] for r in blocked] == (["P"] if policy == "block" else [])


async def test_an_undecodable_message_goes_to_the_dead_letter_topic_and_the_loop_goes_on(
    inturn_topics: KafkaSettings, platform: ScriptedPlatform, make_settings: Callable[..., WorkerSettings]
) -> None:
    produce_raw(inturn_topics, "U", b"\xff not json at all")
    produce(inturn_topics, [text_message("U", "u1")])
    settings = make_settings()
    async with running_worker(settings):
        await events(inturn_topics, expect_terminal=2)
    letters = [decode(DeadLetter, v) for v in read_topic(inturn_topics, inturn_topics.topic_dlq, expect=1)]
    assert len(letters) == 1
    assert letters[0].raw() == b"\xff not json at all"
    assert letters[0].reason.startswith("undecodable message: Message: record: Invalid JSON")
    assert letters[0].room_id == "U"
    assert platform.order() == {"U": ["u1"]}


async def test_a_message_whose_ids_postgresql_cannot_store_is_dead_lettered_and_checkpoints_go_on(
    inturn_topics: KafkaSettings,
    pg_schema: str,
    platform: ScriptedPlatform,
    make_settings: Callable[..., WorkerSettings],
) -> None:
    """U+0000 in a room id (and in its Kafka key): PostgreSQL's text cannot hold it. Taken as a message, its
    cursor would fail every checkpoint after it and no offset would be committed again."""
    poison = msgspec.to_builtins(text_message("N", "n0"))
    poison["room_id"] = "N\x00ul"
    produce_raw(inturn_topics, "N\x00ul", orjson.dumps(poison))
    produce(inturn_topics, [text_message("U", "u1"), text_message("U", "u2")])
    settings = make_settings()
    conn = await asyncpg.connect(pg_schema)
    try:
        async with running_worker(settings):
            await events(inturn_topics, expect_terminal=3)

            async def u_checkpointed() -> bool:
                return bool(await conn.fetchval("SELECT count(*) FROM room_cursors WHERE room_id = 'U'") == 1)

            await eventually(u_checkpointed, 20, "room U's cursor checkpointed")
        stored = await conn.fetch("SELECT room_id, reason FROM dead_letters")
    finally:
        await conn.close()
    letters = [decode(DeadLetter, v) for v in read_topic(inturn_topics, inturn_topics.topic_dlq, expect=1)]
    assert [d.reason.split(":")[:3] for d in letters] == [["undecodable message", " Message", " room_id"]]
    assert letters[0].room_id == "N\x00ul"  # the dead-letter topic keeps the key as it was
    assert [(r["room_id"], r["reason"].startswith("undecodable message: Message: room_id")) for r in stored] == [
        ("N\ufffdul", True)
    ]
    assert platform.order() == {"U": ["u1", "u2"]}
