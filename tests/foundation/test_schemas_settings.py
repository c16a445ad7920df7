"""Schemas validate with one-line reasons; settings fail fast and name the variable at fault."""

from __future__ import annotations

import json
import re

import msgspec
import pytest

from inturn.errors import ConfigError, SchemaError
from inturn.schemas import (
    Ack,
    AckStatus,
    DeadLetter,
    Message,
    decode,
    decode_callback_data,
    encode,
    encode_callback_data,
    validate,
)
from inturn.settings import KafkaSettings, PostgresSettings, load
from tests.support.messages import ack

GOOD = (
    b'{"v":1,"room_id":"A","message_id":"m1","platform":"whatsapp","recipient":"491701",'
    b'"payload":{"type":"text","text":{"body":"hi"}},"created_at_ms":1700000000000}'
)


def test_a_valid_message_round_trips() -> None:
    message = decode(Message, GOOD)
    assert (message.room_id, message.message_id, message.not_before_ms) == ("A", "m1", None)
    assert decode(Message, encode(message)) == message


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"not json", "Message: record: Invalid JSON"),
        (GOOD.replace(b'"room_id":"A",', b""), "Message: room_id: Object missing required field"),
        (GOOD.replace(b'"room_id":"A"', b'"room_id":""'), "Message: room_id: Expected `str` of length >= 1"),
        (GOOD.replace(b'"v":1', b'"v":2'), "Message: v: Invalid enum value 2"),
        (GOOD.replace(b"whatsapp", b"Whats App"), "Message: platform: Expected `str` matching regex"),
        (GOOD.replace(b"whatsapp", b"WhatsApp"), "Message: platform: Expected `str` matching regex"),
        (GOOD.replace(b"whatsapp", b"whats\\u00e4pp"), "Message: platform: Expected `str` matching regex"),
        # PostgreSQL text cannot hold U+0000, and a message's ids are stored there.
        (GOOD.replace(b'"room_id":"A"', b'"room_id":"A\\u0000B"'), "Message: room_id: Expected `str` matching regex"),
        (GOOD.replace(b'"message_id":"m1"', b'"message_id":"\\u0000"'), "Message: message_id: Expected `str` matching"),
        (GOOD.replace(b"1700000000000", b"-1"), "Message: created_at_ms: Expected `int` >= 0"),
        (
            GOOD.replace(b'"payload":{"type":"text","text":{"body":"hi"}}', b'"payload":[]'),
            "Message: payload: Expected",
        ),
        (GOOD.replace(b'"recipient":"491701"', b'"recipient":7'), "Message: recipient: Expected `str`, got `int`"),
        (None, "empty record"),
    ],
)
def test_an_invalid_message_is_refused_with_a_reason_naming_the_field(raw: bytes | None, reason: str) -> None:
    with pytest.raises(SchemaError) as err:
        decode(Message, raw)
    assert err.value.reason.startswith(reason)
    assert "\n" not in err.value.reason
    assert err.value.raw == raw


def test_fields_given_as_text_are_converted_and_bad_ones_refused_naming_the_field() -> None:
    fields = {"room_id": "A", "message_id": "m1", "platform": "whatsapp", "recipient": "1", "payload": {}}
    assert validate(Message, {**fields, "created_at_ms": "17"}).created_at_ms == 17
    with pytest.raises(SchemaError) as err:
        validate(Message, {**fields, "created_at_ms": "17", "platform": None})
    assert err.value.reason == "Message: platform: Expected `str`, got `null`"


def test_a_room_id_may_be_any_other_text() -> None:
    odd = 'r "q" \\ \n\t ünïcødé 💬 \u0001'
    raw = GOOD.replace(b'"room_id":"A"', b'"room_id":' + json.dumps(odd).encode())
    assert decode(Message, raw).room_id == odd


@pytest.mark.parametrize("name", ["whatsapp", "my_platform-2", "42", "-", "_", "WhatsApp", "whats app", "wh\u00e4ts"])
def test_a_message_takes_the_platform_names_an_ack_takes(name: str) -> None:
    """A message's platform is checked with string methods, an ack's with the schema's pattern: the same names."""
    raw = GOOD.replace(b'"whatsapp"', json.dumps(name).encode())
    info = msgspec.inspect.type_info(Ack)
    assert isinstance(info, msgspec.inspect.StructType)
    pattern = next(f.type for f in info.fields if f.name == "platform")
    assert isinstance(pattern, msgspec.inspect.StrType)
    assert pattern.pattern is not None
    if re.search(pattern.pattern, name):
        assert decode(Message, raw).platform == name
    else:
        with pytest.raises(SchemaError, match="platform: Expected `str` matching regex"):
            decode(Message, raw)


def test_an_ack_status_outside_the_known_four_is_refused() -> None:
    sent = ack("A", "m1", "wamid.1", AckStatus.SENT, platform_ts_ms=1, received_at_ms=2)
    bad = encode(sent).replace(b'"sent"', b'"bounced"')
    with pytest.raises(SchemaError, match="status"):
        decode(Ack, bad)


def test_a_dead_letter_keeps_the_original_bytes() -> None:
    raw = b"\x00\xffnot utf8"
    letter = decode(DeadLetter, encode(DeadLetter.of("worker", "undecodable", raw, partition=3, offset=9)))
    assert letter.raw() == raw
    assert (letter.reason, letter.partition, letter.offset) == ("undecodable", 3, 9)


def test_callback_data_carries_room_message_and_partition_and_ignores_foreign_data() -> None:
    assert decode_callback_data(encode_callback_data("room|1", 'm"2')) == ("room|1", 'm"2', None)
    assert decode_callback_data(encode_callback_data("room|1", "m", 7)) == ("room|1", "m", 7)
    assert decode_callback_data('{"r":"room","m":"m","p":0}') == ("room", "m", 0)
    # A partition that cannot be one is dropped (the ack is then routed by the room), the rest still counts.
    for partition in ('"3"', "-1", "1.5", "true", "100000"):
        assert decode_callback_data(f'{{"r":"room","m":"m","p":{partition}}}') == ("room", "m", None)
    for foreign in (None, "", "plain text", "[1,2]", '{"r":1,"m":"x"}'):
        assert decode_callback_data(foreign) is None


def test_settings_come_from_inturn_prefixed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTURN_KAFKA_BOOTSTRAP", "broker:9093")
    monkeypatch.setenv("INTURN_TOPIC_PARTITIONS", "24")
    monkeypatch.setenv("INTURN_KAFKA_CLIENT_CONFIG", '{"security.protocol":"SSL"}')
    settings = load(KafkaSettings)
    assert settings.kafka_bootstrap == "broker:9093"
    assert settings.topic_partitions == 24
    assert settings.kafka_client_config == {"security.protocol": "SSL"}


def test_bad_settings_fail_fast_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTURN_TOPIC_PARTITIONS", "zero")
    with pytest.raises(ConfigError, match="INTURN_TOPIC_PARTITIONS"):
        load(KafkaSettings)


def test_placeholder_secrets_are_refused_in_production(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTURN_ENVIRONMENT", "production")
    monkeypatch.setenv("INTURN_POSTGRES_PASSWORD", "changeme")
    with pytest.raises(ConfigError, match="INTURN_POSTGRES_PASSWORD"):
        load(PostgresSettings)
    monkeypatch.setenv("INTURN_ENVIRONMENT", "development")
    assert load(PostgresSettings).postgres_password is not None
