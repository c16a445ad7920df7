"""Parsing, signatures, room mapping and settings of the webhook: no server needed."""

from __future__ import annotations

import asyncio

import msgspec
import orjson
import pytest
from confluent_kafka import KafkaError, Message
from hypothesis import given
from hypothesis import strategies as st

from inturn import schemas
from inturn.errors import ConfigError, SchemaError
from inturn.schemas import Ack, AckStatus, encode_callback_data
from inturn.settings import load
from inturn.settings.webhook import WebhookSettings
from inturn_webhook.confirmations import Confirmation
from inturn_webhook.intake import Record, ReplayWindow
from inturn_webhook.rooms import MESSAGE_ID_MAX, ROOM_ID_MAX, RoomResolver
from inturn_webhook.signature import SignatureError, sign, verify
from inturn_webhook.statuses import (
    PLATFORM_MESSAGE_ID_MAX,
    PLATFORM_NAME,
    Status,
    ack_bytes,
    parse_generic,
    parse_meta,
    timestamp_ms,
)

from .support import meta_payload, meta_status


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1700000000", 1_700_000_000_000),
        ("1700000000.123", 1_700_000_000_123),
        ("1700000000.5", 1_700_000_000_500),
        ("1700000000.123999", 1_700_000_000_123),
        (1700000000, 1_700_000_000_000),
        (1700000000.25, 1_700_000_000_250),
        ("", None),
        ("-5", None),
        ("17e8", None),
        ("\uff11\uff17\uff10\uff10", None),  # full-width digits are digits to str.isdigit, not to us
        ("1700000000.x", None),
        (True, None),
        (None, None),
        (float("nan"), None),
        ("9" * 12, None),
    ],
)
def test_a_platform_timestamp_is_read_as_integer_milliseconds(value: object, expected: int | None) -> None:
    assert timestamp_ms(value) == expected


text = st.text(min_size=1, max_size=40)


@given(
    room=st.text(min_size=1, max_size=256),
    message=st.none() | st.text(min_size=1, max_size=128),
    pmid=st.text(min_size=1, max_size=256),
    status=st.sampled_from(list(AckStatus)),
    ts=st.integers(min_value=0, max_value=2**53),
    recipient=st.none() | text,
    error=st.none() | text,
)
def test_the_fast_ack_encoding_decodes_as_the_ack_schema_would_build_it(
    room: str, message: str | None, pmid: str, status: AckStatus, ts: int, recipient: str | None, error: str | None
) -> None:
    parsed = Status(pmid, status.value, ts, recipient, room, message, error, {})
    expected = Ack(
        room_id=room,
        message_id=message,
        platform="whatsapp",
        platform_message_id=pmid,
        status=status,
        platform_ts_ms=ts,
        received_at_ms=7,
        recipient=recipient,
        error=error,
    )
    assert schemas.decode(Ack, ack_bytes(parsed, "whatsapp", 7)) == expected


def _has_str(annotation: msgspec.inspect.Type) -> bool:
    if isinstance(annotation, msgspec.inspect.UnionType):
        return any(isinstance(t, msgspec.inspect.StrType) for t in annotation.types)
    return isinstance(annotation, msgspec.inspect.StrType)


def _string_limits(annotation: msgspec.inspect.Type) -> msgspec.inspect.StrType:
    if isinstance(annotation, msgspec.inspect.UnionType):  # optional: the string among (str, None)
        [annotation] = [t for t in annotation.types if isinstance(t, msgspec.inspect.StrType)]
    assert isinstance(annotation, msgspec.inspect.StrType)
    return annotation


def test_the_limits_the_parser_checks_are_the_ack_schemas_own() -> None:
    info = msgspec.inspect.type_info(Ack)
    assert isinstance(info, msgspec.inspect.StructType)
    strings = (msgspec.inspect.StrType, msgspec.inspect.UnionType)
    fields = {f.name: _string_limits(f.type) for f in info.fields if isinstance(f.type, strings) and _has_str(f.type)}
    assert (fields["platform_message_id"].min_length, fields["platform_message_id"].max_length) == (
        1,
        PLATFORM_MESSAGE_ID_MAX,
    )
    assert (fields["room_id"].min_length, fields["room_id"].max_length) == (1, ROOM_ID_MAX)
    assert (fields["message_id"].min_length, fields["message_id"].max_length) == (1, MESSAGE_ID_MAX)
    platform = fields["platform"]
    assert platform.pattern is not None
    assert PLATFORM_NAME.pattern == platform.pattern.replace(
        "]+$", f"]{{{platform.min_length},{platform.max_length}}}$"
    )


def test_the_room_comes_from_callback_data_first_then_from_the_recipient_template() -> None:
    rooms = RoomResolver("wa:{account}:{recipient}")
    assert rooms.resolve(encode_callback_data("room-1", "m-1"), "4917", "acc") == ("room-1", "m-1", None)
    assert rooms.resolve(encode_callback_data("room-1", "m-1", 3), "4917", "acc") == ("room-1", "m-1", 3)
    assert rooms.resolve("not ours", "4917", "acc") == ("wa:acc:4917", None, None)
    assert rooms.resolve(encode_callback_data("r" * 300, "m"), None) == (None, None, None)  # too long for an Ack
    assert RoomResolver(None).resolve(None, "4917") == (None, None, None)


def test_a_json_recipient_map_names_rooms_and_leaves_others_unknown() -> None:
    rooms = RoomResolver('{"4917": "room-a"}')
    assert rooms.resolve(None, "4917") == ("room-a", None, None)
    assert rooms.resolve(None, "4918") == (None, None, None)


def test_the_signature_accepts_any_listed_secret_and_refuses_everything_else() -> None:
    body = b'{"entry":[]}'
    verify(sign(body, b"old"), body, [b"new", b"old"])
    for header in [None, "", "sha256=", "sha1=" + "0" * 40, "sha256=" + "g" * 64, sign(body, b"other")]:
        with pytest.raises(SignatureError):
            verify(header, body, [b"new", b"old"])
    with pytest.raises(SignatureError):
        verify(sign(body, b"new"), body + b" ", [b"new"])  # the raw bytes are signed, not the JSON


def test_an_envelope_that_is_not_metas_shape_is_refused_whole_with_a_reason() -> None:
    rooms = RoomResolver(None)
    for body, reason in [
        (b"[]", "body is not a JSON object"),
        (b'{"entry": {}}', "entry: not a list"),
        (b'{"entry": [{"changes": [{"value": 3}]}]}', "entry[0].changes[0].value: not an object"),
        (b'{"entry": [{"changes": [{"value": {"statuses": {}}}]}]}', "entry[0].changes[0].value.statuses: not a list"),
    ]:
        with pytest.raises(SchemaError) as err:
            parse_meta(body, rooms)
        assert err.value.reason == reason


def test_other_change_fields_and_incoming_messages_are_counted_as_ignored() -> None:
    payload = meta_payload(meta_status("w1", room="r", message="m"), messages=[{"id": "in"}])
    payload["entry"][0]["changes"].append({"field": "account_update", "value": {}})
    callback = parse_meta(orjson.dumps(payload), RoomResolver(None))
    assert [s.platform_message_id for s in callback.statuses] == ["w1"]
    assert callback.ignored == ["incoming_message", "account_update"]


def test_a_generic_ack_missing_a_field_is_rejected_alone() -> None:
    body = (
        b'{"acks":[{"room_id":"r","platform_message_id":"p","status":"sent","timestamp_ms":1},'
        b'{"room_id":"r","status":"sent","timestamp_ms":1}]}'
    )
    callback = parse_generic(body, "sms")
    assert len(callback.statuses) == 1
    assert [r.reason for r in callback.rejected] == ["platform_message_id: missing, not a string or too long"]


def test_a_status_value_that_is_not_a_string_is_rejected_alone_in_either_format() -> None:
    """A list or object as the status value (unhashable) is a bad status, not an error of the whole request."""
    meta = meta_payload(meta_status("w1", room="r", message="m"), meta_status("w2", room="r", message="m"))
    meta["entry"][0]["changes"][0]["value"]["statuses"][1]["status"] = ["sent"]
    callback = parse_meta(orjson.dumps(meta), RoomResolver(None))
    assert [s.platform_message_id for s in callback.statuses] == ["w1"]
    assert [r.reason for r in callback.rejected] == ["status: unsupported value ['sent']"]
    generic = parse_generic(
        b'{"acks":[{"room_id":"r","platform_message_id":"p","status":{"v":"sent"},"timestamp_ms":1}]}', "sms"
    )
    assert generic.statuses == []
    assert [r.reason for r in generic.rejected] == ["status: unsupported value {'v': 'sent'}"]


def test_secret_lists_read_comma_separated_or_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTURN_WEBHOOK_APP_SECRETS", "new, old")
    monkeypatch.setenv("INTURN_WEBHOOK_GENERIC_SECRET", '["a,b", "c"]')
    settings = load(WebhookSettings)
    assert [s.get_secret_value() for s in settings.webhook_app_secrets] == ["new", "old"]
    assert [s.get_secret_value() for s in settings.webhook_generic_secret] == ["a,b", "c"]


def test_bad_webhook_settings_fail_fast_naming_the_variable() -> None:
    production = {"environment": "production", "webhook_verify_token": "a-real-token"}
    with pytest.raises(ConfigError, match="INTURN_WEBHOOK_ROOM_FROM_RECIPIENT"):
        load(WebhookSettings, webhook_room_from_recipient="room-without-placeholder")
    with pytest.raises(ConfigError, match="WEBHOOK_APP_SECRETS is empty"):
        load(WebhookSettings, **production, webhook_app_secrets=[])
    with pytest.raises(ConfigError, match="placeholder"):
        load(WebhookSettings, **production, webhook_app_secrets=["changeme"])


async def test_the_replay_window_remembers_only_what_kafka_confirmed_and_forgets_the_oldest() -> None:
    window = ReplayWindow(2)
    request = Confirmation(asyncio.get_running_loop(), 30)
    for key in (("p", "a", "sent"), ("p", "b", "sent")):
        window.in_flight[key] = Record(window, key, request)
    window.in_flight["p", "a", "sent"].delivered(None, Message())
    # Refused, so answered 503: the platform's retry must publish it.
    window.in_flight["p", "b", "sent"].delivered(KafkaError(KafkaError._TRANSPORT), Message())
    assert ("p", "a", "sent") in window
    assert ("p", "b", "sent") not in window
    assert not window.in_flight
    window.remember(("p", "c", "sent"))
    window.remember(("p", "d", "sent"))
    assert ("p", "a", "sent") not in window  # the window is bounded: the oldest went first
