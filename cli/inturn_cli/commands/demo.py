"""``inturn demo``: bring the local stack up, push messages through Kafka, show what happened, tear down."""

from __future__ import annotations

import argparse
import time

from confluent_kafka import TopicPartition

from inturn import topics
from inturn.devstack.stack import LocalStack
from inturn.kafka import make_admin, make_consumer, make_producer, partition_for
from inturn.schemas import Message, decode, encode, now_ms
from inturn.settings import KafkaSettings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``demo``."""
    parser = sub.add_parser(
        "demo",
        help="run the pipeline locally and show its result",
        description="Start Kafka, PostgreSQL and the Pub/Sub emulator locally, create inturn's topics, send "
        "messages of a few rooms, read them back per partition, and stop everything.",
    )
    parser.add_argument("--rooms", type=int, default=5, help="number of rooms (default 5)")
    parser.add_argument("--per-room", type=int, default=4, help="messages per room (default 4)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    stack = LocalStack()
    print("starting Kafka (KRaft), PostgreSQL and the Pub/Sub emulator ...", flush=True)
    state = stack.start()
    try:
        for key, value in state.env().items():
            print(f"  {key}={value}")
        settings = KafkaSettings(kafka_bootstrap=state.kafka_bootstrap, topic_partitions=4)
        admin = make_admin(settings)
        print(f"created topics: {', '.join(topics.create(admin, settings))}")
        producer = make_producer(settings)
        rooms = [f"room-{chr(ord('A') + i)}" for i in range(args.rooms)]
        sent = 0
        for n in range(args.per_room):
            for room in rooms:
                message = Message(
                    room_id=room,
                    message_id=f"{room}-{n}",
                    platform="whatsapp",
                    recipient=f"4917000{rooms.index(room)}",
                    payload={"type": "text", "text": {"body": f"message {n}"}},
                    created_at_ms=now_ms(),
                )
                producer.produce(settings.topic_messages, key=room, value=encode(message))
                sent += 1
        left = producer.flush(15)
        print(f"produced {sent - left} messages over {len(rooms)} rooms (murmur2 partitioner, idempotent)")
        consumer = make_consumer(settings, "inturn-demo")
        consumer.assign([TopicPartition(settings.topic_messages, p, 0) for p in range(settings.topic_partitions)])
        per_room: dict[str, list[str]] = {}
        partitions: dict[str, int] = {}
        deadline = time.monotonic() + 30
        while sum(map(len, per_room.values())) < sent and time.monotonic() < deadline:
            for record in consumer.consume(500, 0.5):
                if record.error() is not None:
                    continue
                message = decode(Message, record.value())
                per_room.setdefault(message.room_id, []).append(message.message_id.rsplit("-", 1)[1])
                partitions[message.room_id] = record.partition() or 0
        consumer.close()
        print("read back, per room (partition: order):")
        ok = True
        for room in rooms:
            order = per_room.get(room, [])
            in_order = order == [str(i) for i in range(args.per_room)]
            same = partitions.get(room) == partition_for(room, settings.topic_partitions)
            ok = ok and in_order and same
            print(f"  {room}: p{partitions.get(room)} {' '.join(order)}  {'in order' if in_order else 'OUT OF ORDER'}")
        print(f"{'ok' if ok else 'FAILED'} in {time.monotonic() - t0:.1f}s")
        return 0 if ok else 1
    finally:
        print("stopping the stack ...", flush=True)
        stack.stop()
