"""``inturn.dead_letters``: a dead letter is whole when its record fits the topic's limit, bounded otherwise."""

from __future__ import annotations

import base64
import hashlib

import pytest

from inturn import dead_letters, schemas


def test_the_limit_is_the_smaller_kafka_limit_less_the_headroom() -> None:
    assert dead_letters.record_limit() == 1_000_000 - 8 * 1024
    assert dead_letters.record_limit(producer_max=2_000_000, topic_max=500_000, headroom=0) == 500_000


def test_a_body_that_fits_is_kept_whole() -> None:
    raw = b"\x00\xff not json" * 1000
    letter = dead_letters.dead_letter("webhook", "unreadable", raw, topic="inturn.acks")
    assert (letter.raw(), letter.truncated, letter.raw_size, letter.raw_sha256) == (raw, False, None, None)
    assert len(schemas.encode(letter)) <= dead_letters.RECORD_LIMIT


@pytest.mark.parametrize("size", [760_000, 900_000, 5_000_000])
def test_a_body_too_large_for_the_topic_becomes_a_bounded_record(size: int) -> None:
    raw = bytes(range(256)) * (size // 256)
    letter = dead_letters.dead_letter("webhook", "unreadable", raw, topic="inturn.acks")
    encoded = schemas.encode(letter)
    assert len(encoded) <= dead_letters.RECORD_LIMIT
    assert len(encoded) < 10_000  # the head, not the body
    decoded = schemas.decode(schemas.DeadLetter, encoded)
    assert decoded.truncated
    assert (decoded.raw_size, decoded.raw_sha256) == (len(raw), hashlib.sha256(raw).hexdigest())
    assert decoded.raw() == raw[:4096]
    assert decoded.reason.startswith("unreadable (too large for the dead-letter topic")


def test_the_boundary_is_the_encoded_size() -> None:
    shell = len(schemas.encode(dead_letters.dead_letter("bridge", "r", b"", limit=10**9)))
    raw = b"a" * 3000  # 4,000 bytes of base64
    assert not dead_letters.dead_letter("bridge", "r", raw, limit=shell + 4000).truncated
    assert dead_letters.dead_letter("bridge", "r", raw, limit=shell + 3999).truncated


def test_a_small_limit_still_bounds_the_record_and_a_long_reason_is_cut() -> None:
    raw = b"b" * 100_000
    letter = dead_letters.dead_letter("worker", "x" * 5000, raw, limit=2048)
    assert len(schemas.encode(letter)) <= 2048
    assert letter.truncated
    assert raw.startswith(base64.b64decode(letter.raw_b64))


def test_fitting_keeps_a_letter_that_fits_and_bounds_one_that_does_not() -> None:
    small = schemas.DeadLetter.of("worker", "gave up", b"m" * 100, room_id="r1")
    assert dead_letters.fitting(small, b"m" * 100) is small
    raw = b"m" * 900_000
    big = schemas.DeadLetter.of("worker", "gave up", raw, room_id="r1", partition=3, offset=7)
    bounded = dead_letters.fitting(big, raw)
    assert (bounded.truncated, bounded.raw_size, bounded.room_id, bounded.partition, bounded.offset) == (
        True,
        900_000,
        "r1",
        3,
        7,
    )
    assert len(schemas.encode(bounded)) <= dead_letters.RECORD_LIMIT
