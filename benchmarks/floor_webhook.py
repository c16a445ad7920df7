"""The floor of the webhook benchmark: per single-status callback, the work any webhook must do, and nothing else.

An ASGI application served like ``inturn webhook`` (uvicorn, uvloop, httptools; ``benchmarks.bench_webhook`` starts
it as the server ``floor_uvicorn_httptools``). Per callback it finds the signature header, reads the body, checks
the HMAC (the webhook's prepared ``Secret``), reads the status as the webhook does (``statuses.parse_meta``),
produces the ack with its headers on its partition (``inturn.kafka.AsyncProducer``, the webhook's producer and
settings), waits for Kafka's confirmation, and answers 200. It keeps no replay window, counts nothing, watches no
deadline, checks no limit and dead-letters nothing; any request it cannot take that way fails (500), which the
benchmark counts as an error. ``GET`` of any path answers
the same fixed bytes as the webhook's ``/healthz``, so the bare request of this server is measured as the
webhook's is.

Against its own bare request it is the price of an HTTP POST, one Kafka record and the wait for its confirmation;
the webhook against it is the price of what the webhook promises beyond that (docs/webhook.md).
"""

from __future__ import annotations

import asyncio

from confluent_kafka import KafkaError, Message
from starlette.types import Receive, Scope, Send

from inturn import probes
from inturn.kafka import AsyncProducer, make_producer
from inturn.runtime import tune_gc
from inturn.schemas import now_ms
from inturn.settings import load
from inturn.settings.webhook import WebhookSettings
from inturn_webhook.app import GC_YOUNG_THRESHOLD
from inturn_webhook.intake import ack_headers
from inturn_webhook.rooms import RoomResolver
from inturn_webhook.signature import Secret, verify
from inturn_webhook.statuses import ack_bytes, parse_meta

_SIGNATURE = b"x-hub-signature-256"
_STATUS, _BODY = probes.health_answer(True, {})
_START = {
    "type": "http.response.start",
    "status": _STATUS,
    "headers": [(b"content-length", b"%d" % len(_BODY)), (b"content-type", b"application/json")],
}
_ANSWER = {"type": "http.response.body", "body": _BODY}


class Floor:
    """The application: started by the ASGI lifespan (the producer needs the running loop)."""

    def __init__(self) -> None:
        self.settings = load(WebhookSettings)
        self.secrets = [Secret(s.get_secret_value().encode()) for s in self.settings.webhook_app_secrets]
        self.rooms = RoomResolver(None)  # the benchmark's callbacks carry inturn's callback data
        self.producer: AsyncProducer | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["method"] == "POST":
            await self._callback(scope, receive)
        await send(_START)
        await send(_ANSWER)

    async def _callback(self, scope: Scope, receive: Receive) -> None:
        signature = next(value for name, value in scope["headers"] if name == _SIGNATURE)
        body: bytes = (await receive())["body"]
        verify(signature.decode("latin-1"), body, self.secrets)
        status = parse_meta(body, self.rooms).statuses[0]
        if self.producer is None or status.room_id is None:
            raise RuntimeError("not started, or a status without a room")
        confirmed: asyncio.Future[KafkaError | None] = asyncio.get_running_loop().create_future()

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            confirmed.set_result(err)  # one report per record: the future is never done before

        self.producer.produce_then(
            self.settings.topic_acks,
            ack_bytes(status, "whatsapp", now_ms()),
            delivered,
            status.room_id,
            ack_headers(status),
            status.partition,
        )
        if (error := await confirmed) is not None:
            raise RuntimeError(f"Kafka refused the ack: {error}")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        self.producer = AsyncProducer(
            make_producer(self.settings, **{"linger.ms": self.settings.webhook_kafka_linger_ms})
        )
        tune_gc(GC_YOUNG_THRESHOLD)  # as the webhook's served process (app.settle_heap)
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        await self.producer.close(5)
        await send({"type": "lifespan.shutdown.complete"})


def app() -> Floor:
    """uvicorn ``--factory`` entry point."""
    return Floor()
