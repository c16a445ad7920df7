"""No callback body crashes the parsers: any JSON value anywhere in a valid callback of each format is read, rejected
alone, or dead-lettered whole (``SchemaError``), never another exception (a 500 and a platform retrying forever).

A value of another type than the parser expects (a list where a string was, a number where an object was) is
the usual way to reach an unforeseen exception; these tests put every kind of value at every place the
platforms' formats have.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from inturn.errors import SchemaError
from inturn.schemas import encode_callback_data
from inturn_webhook.platforms import parse_messenger, parse_twilio
from inturn_webhook.rooms import RoomResolver
from inturn_webhook.statuses import Callback, ack_bytes, parse_generic, parse_meta

from .support import meta_payload, meta_status

ROOMS = RoomResolver("room:{recipient}")

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["sent", "delivered", "read", "failed", "1700000000", "1700000000.5", "mid.1", "r1"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=12,
)


def _meta() -> dict[str, Any]:
    data = {"biz_opaque_callback_data": encode_callback_data("room-a", "m-1", 2)}
    return meta_payload(
        meta_status("wamid.1", "sent", room="room-a", message="m-1", **data),
        meta_status("wamid.2", "failed", errors=[{"code": 131026, "title": "Message undeliverable"}]),
    )


def _generic() -> dict[str, Any]:
    return {
        "acks": [
            {"room_id": "r1", "message_id": "m1", "platform_message_id": "p1", "status": "sent", "timestamp_ms": 5},
            {"room_id": "r1", "platform_message_id": "p2", "status": "read", "timestamp_ms": 6, "partition": 1},
        ]
    }


def _messenger() -> dict[str, Any]:
    sender, page = {"id": "6543210"}, {"id": "1122334455"}
    return {
        "object": "page",
        "entry": [
            {
                "id": "1122334455",
                "time": 1458692752478,
                "messaging": [
                    {"sender": sender, "recipient": page, "delivery": {"watermark": 1458668856253, "mids": ["mid.1"]}},
                    {"sender": sender, "recipient": page, "read": {"watermark": 1458668856253}},
                ],
            }
        ],
    }


def _places(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document: the root, each value of an object, each item of a list."""
    places = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            places += _places(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            places += _places(value, (*path, index))
    return places


def _replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return doc


def _each_place(valid: Any) -> st.SearchStrategy[bytes]:
    places = _places(valid())
    # The standard library writes what orjson cannot (integers beyond 64 bits), as a platform might send it.
    return st.builds(
        lambda at, value: json.dumps(_replaced(valid(), at, value)).encode(), st.sampled_from(places), JSON
    )


def _read(parse: Any, body: bytes) -> None:
    try:
        callback: Callback = parse(body)
    except SchemaError:  # the documented answer: the whole body on the dead-letter topic, 200
        return
    for status in callback.statuses:  # what the webhook produces of each
        ack_bytes(status, "whatsapp", 1)
    for rejected in callback.rejected:
        assert rejected.reason


@settings(max_examples=300, deadline=None)
@given(body=_each_place(_meta))
def test_any_value_anywhere_in_a_meta_callback_is_parsed_or_dead_lettered(body: bytes) -> None:
    _read(lambda raw: parse_meta(raw, ROOMS), body)


@settings(max_examples=200, deadline=None)
@given(body=_each_place(_generic))
def test_any_value_anywhere_in_a_generic_callback_is_parsed_or_dead_lettered(body: bytes) -> None:
    _read(lambda raw: parse_generic(raw, "sms"), body)


@settings(max_examples=200, deadline=None)
@given(body=_each_place(_messenger))
def test_any_value_anywhere_in_a_messenger_callback_is_parsed_or_dead_lettered(body: bytes) -> None:
    _read(lambda raw: parse_messenger(raw, ROOMS, "messenger"), body)


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_as_a_callback_body_are_parsed_or_dead_lettered(body: bytes) -> None:
    for parse in (
        lambda raw: parse_meta(raw, ROOMS),
        lambda raw: parse_generic(raw, "sms"),
        lambda raw: parse_messenger(raw, ROOMS, "instagram"),
        lambda raw: parse_twilio(raw, "https://hooks.example/twilio", ROOMS, 1),
    ):
        _read(parse, body)
