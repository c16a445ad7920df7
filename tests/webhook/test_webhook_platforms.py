"""Messenger, Instagram and Twilio status callbacks (payloads written from each platform's documentation) parsed
into statuses, and their signatures: no server needed."""

from __future__ import annotations

from urllib.parse import urlencode

import orjson
import pytest

from inturn import schemas
from inturn.errors import SchemaError
from inturn.platforms.twilio import status_callback_url, twilio_signature
from inturn.schemas import Ack
from inturn_webhook.platforms import (
    WATERMARK_ID_PREFIX,
    form_params,
    parse_messenger,
    parse_twilio,
    public_url,
    verify_twilio,
)
from inturn_webhook.rooms import RoomResolver
from inturn_webhook.signature import SignatureError, sign, verify
from inturn_webhook.statuses import ack_bytes

ROOMS = RoomResolver("fb:{recipient}")
PAGE, PSID = "1122334455", "6543210"


def _page(*events: object, obj: str = "page") -> bytes:
    return orjson.dumps({"object": obj, "entry": [{"id": PAGE, "time": 1458692752478, "messaging": list(events)}]})


def _delivery(watermark: int, mids: list[str] | None = None) -> dict[str, object]:
    delivery: dict[str, object] = {"watermark": watermark}
    if mids is not None:
        delivery["mids"] = mids
    return {"sender": {"id": PSID}, "recipient": {"id": PAGE}, "delivery": delivery}


# --- Messenger -----------------------------------------------------------------------------------------------------


def test_a_messenger_delivery_with_mids_acknowledges_each_and_carries_the_watermark() -> None:
    body = _page(_delivery(1458668856253, ["mid.1458668856218:ed81099e15d3f4f233", "mid.2"]))
    callback = parse_messenger(body, ROOMS, "messenger")
    assert [(s.platform_message_id, s.status, s.watermark_ms) for s in callback.statuses] == [
        ("mid.1458668856218:ed81099e15d3f4f233", "delivered", 1458668856253),
        ("mid.2", "delivered", 1458668856253),
    ]
    first = callback.statuses[0]
    assert (first.room_id, first.recipient, first.message_id, first.platform_ts_ms) == (
        f"fb:{PSID}",
        PSID,
        None,
        1458668856253,
    )
    assert not callback.rejected


def test_a_messenger_delivery_without_mids_is_one_watermark_status() -> None:
    callback = parse_messenger(_page(_delivery(1458668856253)), ROOMS, "messenger")
    [status] = callback.statuses
    assert status.platform_message_id == f"{WATERMARK_ID_PREFIX}{PSID}.1458668856253"
    assert (status.status, status.watermark_ms, status.room_id) == ("delivered", 1458668856253, f"fb:{PSID}")
    ack = schemas.decode(Ack, ack_bytes(status, "messenger", 7))
    assert ack.watermark_ms == 1458668856253
    assert ack.platform == "messenger"


def test_watermarks_of_two_recipients_at_the_same_millisecond_are_not_one_status() -> None:
    other = {"sender": {"id": "999"}, "recipient": {"id": PAGE}, "delivery": {"watermark": 77}}
    callback = parse_messenger(_page(_delivery(77), other), ROOMS, "messenger")
    assert len({s.platform_message_id for s in callback.statuses}) == 2  # the replay window keys on this id


def test_a_messenger_read_is_a_read_watermark() -> None:
    event = {"sender": {"id": PSID}, "recipient": {"id": PAGE}, "timestamp": 1458668856463,
             "read": {"watermark": 1458668856253}}  # fmt: skip
    [status] = parse_messenger(_page(event), ROOMS, "messenger").statuses
    assert (status.status, status.watermark_ms) == ("read", 1458668856253)


def test_a_per_message_ack_carries_no_watermark_field() -> None:
    event = {"sender": {"id": PSID}, "recipient": {"id": PAGE}, "timestamp": 1569262486134, "read": {"mid": "m1"}}
    [status] = parse_messenger(_page(event, obj="instagram"), ROOMS, "instagram").statuses
    assert "watermark_ms" not in orjson.loads(ack_bytes(status, "instagram", 7))


def test_messenger_events_that_are_not_statuses_are_ignored_by_kind() -> None:
    echo = {"sender": {"id": PAGE}, "recipient": {"id": PSID}, "message": {"mid": "m", "is_echo": True}}
    incoming = {"sender": {"id": PSID}, "recipient": {"id": PAGE}, "message": {"mid": "m", "text": "hi"}}
    postback = {"sender": {"id": PSID}, "recipient": {"id": PAGE}, "postback": {"payload": "x"}}
    callback = parse_messenger(_page(echo, incoming, postback), ROOMS, "messenger")
    assert callback.ignored == ["message_echo", "incoming_message", "postback"]
    assert not callback.statuses


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ({"sender": {"id": PSID}, "recipient": {"id": PAGE}, "delivery": {"mids": ["m"]}}, "delivery.watermark"),
        ({"sender": {"id": PSID}, "recipient": {"id": PAGE}, "delivery": {"watermark": "soon"}}, "delivery.watermark"),
        ({"sender": {"id": PSID}, "recipient": {"id": PAGE}, "delivery": {"watermark": 1, "mids": "m"}}, "mids"),
        ({"sender": {"id": PSID}, "recipient": {"id": PAGE}, "delivery": {"watermark": 1, "mids": [7]}}, "mids"),
        ({"recipient": {"id": PAGE}, "delivery": {"watermark": 1}}, "sender.id"),
        ({"sender": {"id": PSID}, "recipient": {"id": PAGE}, "read": {"mid": "m"}}, "timestamp"),
        ("not an event", "not an object"),
    ],
)
def test_an_unreadable_messenger_event_is_rejected_alone_with_its_reason(event: object, reason: str) -> None:
    callback = parse_messenger(_page(event, _delivery(5, ["ok"])), ROOMS, "messenger")
    assert [s.platform_message_id for s in callback.statuses] == ["ok"]
    [rejected] = callback.rejected
    assert reason in rejected.reason


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "invalid JSON"),
        (b"[]", "not a JSON object"),
        (orjson.dumps({"object": "instagram", "entry": []}), "object"),
        (orjson.dumps({"object": "page"}), "entry"),
        (orjson.dumps({"object": "page", "entry": [{"messaging": {}}]}), "messaging"),
    ],
)
def test_a_malformed_messenger_body_is_refused_whole_with_a_reason(body: bytes, reason: str) -> None:
    with pytest.raises(SchemaError, match=reason):
        parse_messenger(body, ROOMS, "messenger")


def test_a_messenger_status_without_a_room_mapping_has_no_room() -> None:
    [status] = parse_messenger(_page(_delivery(9, ["m"])), RoomResolver(None), "messenger").statuses
    assert status.room_id is None  # the route dead-letters it as an unknown room


# --- Instagram -----------------------------------------------------------------------------------------------------


def test_instagram_messaging_seen_is_a_read_of_that_message() -> None:
    seen = {"sender": {"id": "IGSID"}, "recipient": {"id": "IGID"}, "timestamp": 1569262486134,
            "read": {"mid": "aWdfZAG1"}}  # fmt: skip
    [status] = parse_messenger(_page(seen, obj="instagram"), RoomResolver("ig:{recipient}"), "instagram").statuses
    assert (status.platform_message_id, status.status, status.platform_ts_ms) == ("aWdfZAG1", "read", 1569262486134)
    assert (status.room_id, status.watermark_ms) == ("ig:IGSID", None)


def test_an_instagram_body_is_not_taken_for_messenger() -> None:
    with pytest.raises(SchemaError, match="object"):
        parse_messenger(_page(_delivery(1, ["m"])), ROOMS, "instagram")


def test_messenger_and_instagram_bodies_are_signed_like_whatsapp_s() -> None:
    body = _page(_delivery(1, ["m"]))
    verify(sign(body, b"app-secret"), body, [b"app-secret"])
    with pytest.raises(SignatureError):
        verify(sign(body, b"other-secret"), body, [b"app-secret"])


# --- Twilio --------------------------------------------------------------------------------------------------------

CALLBACK = status_callback_url("https://hooks.example.com/webhooks/twilio", "room-7", "m-7", 3)


def _twilio_form(status: str, **extra: str) -> bytes:
    fields = {
        "AccountSid": "AC00000000000000000000000000000001",
        "ApiVersion": "2010-04-01",
        "From": "+15005550006",
        "MessageSid": "SM0123456789abcdef0123456789abcdef",
        "MessageStatus": status,
        "SmsSid": "SM0123456789abcdef0123456789abcdef",
        "SmsStatus": status,
        "To": "+4917000001",
        **extra,
    }
    return urlencode(fields).encode()


@pytest.mark.parametrize(
    ("twilio", "inturn"),
    [("sent", "sent"), ("delivered", "delivered"), ("read", "read"), ("undelivered", "failed"),
     ("failed", "failed"), ("canceled", "failed")],
)  # fmt: skip
def test_every_final_twilio_status_is_mapped_and_routed_by_the_callback_url(twilio: str, inturn: str) -> None:
    [status] = parse_twilio(_twilio_form(twilio), CALLBACK, RoomResolver(None), 1_700_000_000_000).statuses
    assert (status.platform_message_id, status.status) == ("SM0123456789abcdef0123456789abcdef", inturn)
    assert (status.room_id, status.message_id, status.partition) == ("room-7", "m-7", 3)
    assert (status.recipient, status.platform_ts_ms) == ("+4917000001", 1_700_000_000_000)


@pytest.mark.parametrize("twilio", ["queued", "accepted", "scheduled", "sending", "partially_delivered"])
def test_intermediate_twilio_statuses_acknowledge_nothing(twilio: str) -> None:
    callback = parse_twilio(_twilio_form(twilio), CALLBACK, RoomResolver(None), 1)
    assert (callback.statuses, callback.ignored) == ([], [twilio])


def test_a_failed_twilio_status_carries_its_error_code() -> None:
    form = _twilio_form("undelivered", ErrorCode="30003")
    [status] = parse_twilio(form, CALLBACK, RoomResolver(None), 1).statuses
    assert status.error is not None
    assert status.error.startswith("30003")


def test_a_twilio_status_without_callback_data_finds_its_room_from_the_recipient() -> None:
    url = "https://hooks.example.com/webhooks/twilio"
    [status] = parse_twilio(_twilio_form("delivered"), url, RoomResolver("sms:{recipient}"), 1).statuses
    assert (status.room_id, status.message_id, status.partition) == ("sms:+4917000001", None, None)


def test_an_unknown_twilio_status_is_rejected_with_its_value() -> None:
    callback = parse_twilio(_twilio_form("teleported"), CALLBACK, RoomResolver(None), 1)
    [rejected] = callback.rejected
    assert "teleported" in rejected.reason


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (urlencode({"MessageStatus": "sent"}).encode(), "MessageSid"),
        (urlencode({"MessageSid": "SM1"}).encode(), "MessageStatus"),
        (b"\xff\xfe", "form-encoded"),
        (b"MessageSid", "form-encoded"),
    ],
)
def test_a_malformed_twilio_body_is_refused_with_a_reason(body: bytes, reason: str) -> None:
    with pytest.raises(SchemaError, match=reason):
        parse_twilio(body, CALLBACK, RoomResolver(None), 1)


def test_the_twilio_signature_matches_twilio_s_documented_example() -> None:
    # https://www.twilio.com/docs/usage/security#validating-requests: Auth Token 12345, this URL and these parameters.
    params = [("CallSid", "CA1234567890ABCDE"), ("Caller", "+12349013030"), ("Digits", "1234"),
              ("From", "+12349013030"), ("To", "+18005551212")]  # fmt: skip
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"
    assert twilio_signature(b"12345", url, reversed(params)) == "0/KCTR6DLpKmkAf8muzZqo1nDgQ="  # order given: any
    verify_twilio("0/KCTR6DLpKmkAf8muzZqo1nDgQ=", url, params, [b"old-token", b"12345"])


def test_a_correct_twilio_signature_is_accepted_and_any_change_refused() -> None:
    body = _twilio_form("delivered")
    params = form_params(body)
    header = twilio_signature(b"auth-token", CALLBACK, params)
    verify_twilio(header, CALLBACK, params, [b"auth-token"])
    tampered = [(k, "failed" if k == "MessageStatus" else v) for k, v in params]
    other_url = CALLBACK.replace("m-7", "m-8")
    for args in (
        (header, CALLBACK, tampered, [b"auth-token"]),
        (header, other_url, params, [b"auth-token"]),  # a forged room in the query
        (header, CALLBACK, params, [b"wrong-token"]),
        (None, CALLBACK, params, [b"auth-token"]),
        (header[:-2], CALLBACK, params, [b"auth-token"]),
    ):
        with pytest.raises(SignatureError):
            verify_twilio(*args)


def test_a_twilio_signature_over_the_url_with_its_default_port_is_accepted_either_way() -> None:
    params = form_params(_twilio_form("sent"))
    with_port = CALLBACK.replace("hooks.example.com", "hooks.example.com:443")
    verify_twilio(twilio_signature(b"t", with_port, params), CALLBACK, params, [b"t"])
    verify_twilio(twilio_signature(b"t", CALLBACK, params), with_port, params, [b"t"])


def test_the_public_url_is_rebuilt_behind_a_proxy() -> None:
    target = "/webhooks/twilio?inturn=%7B%22r%22%3A%22a%22%7D"
    assert public_url(target, scheme="http", host="webhook:8080") == f"http://webhook:8080{target}"
    assert (
        public_url(
            target,
            scheme="http",
            host="webhook:8080",
            forwarded_proto="https",
            forwarded_host="hooks.example.com, lb.internal",
        )
        == f"https://hooks.example.com{target}"
    )
    configured = public_url(
        target, scheme="http", host="x", forwarded_host="evil.example", public_base_url="https://hooks.example.com/"
    )
    assert configured == f"https://hooks.example.com{target}"
    with pytest.raises(ValueError, match="host"):
        public_url(target, scheme="http", host=None)
