"""``inturn produce``: publish test messages over many rooms, to Kafka or to Pub/Sub, with a progress bar."""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from concurrent.futures import Future
from typing import Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from inturn.errors import ConfigError
from inturn.schemas import Message, encode
from inturn.sdk import MessageProducer, PlannedMessage, plan_messages, planned_to_message
from inturn.settings import load
from inturn.settings.bridge import BridgeSettings
from inturn_cli import reach
from inturn_cli.output import add_json, print_json

PATTERN_HELP = (
    "interleaving to reproduce, e.g. 'A7 B3 A6 A5 C5 C4 B2': each token is ONE message of the room its "
    "letters name (room-A); messages are produced in exactly the token order, repeated until --messages. "
    "The number is only a label (in the text and the 'label' attribute); each room's messages are "
    "numbered 1, 2, 3... in production order (attribute 'seq'), the order the worker must deliver them in."
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``produce``."""
    parser = sub.add_parser(
        "produce",
        help="publish test messages over many rooms (Kafka or Pub/Sub)",
        description="Produce --messages messages over --rooms rooms (round robin), or the interleaving of "
        "--pattern, to inturn's messages topic (key = room) or to a Pub/Sub topic (ordering key = room). "
        "Message ids are '<run>-<room>-<seq>'; attributes carry seq, label and run.",
    )
    parser.add_argument("--rooms", type=int, help="number of rooms, room-0001... (not with --pattern)")
    parser.add_argument("--messages", type=int, help="messages in total (with --pattern: default one pass)")
    parser.add_argument("--pattern", help=PATTERN_HELP)
    parser.add_argument("--rate", type=float, help="messages per second, at most (default: as fast as possible)")
    parser.add_argument("--to", choices=["kafka", "pubsub"], default="kafka", help="where to (default kafka)")
    parser.add_argument("--pubsub-topic", help="Pub/Sub topic id or projects/<p>/topics/<t> (with --to pubsub)")
    parser.add_argument(
        "--platform",
        default="whatsapp",
        help="the messages' platform, one the worker has an adapter for (default whatsapp)",
    )
    parser.add_argument("--room-prefix", default="room-", help="room id prefix (default 'room-')")
    parser.add_argument("--run-id", help="prefix of the message ids (default: random)")
    add_json(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    if args.pattern is not None and args.rooms is not None:
        raise ConfigError("--rooms and --pattern exclude each other: with a pattern, its letters are the rooms")
    if args.pattern is None and (args.rooms is None or args.messages is None):
        raise ConfigError("give --rooms and --messages, or --pattern")
    if args.to == "pubsub" and not args.pubsub_topic:
        raise ConfigError("--to pubsub needs --pubsub-topic")
    if args.rate is not None and args.rate <= 0:
        raise ConfigError(f"--rate must be above 0, not {args.rate}")
    from inturn.platforms import ADAPTERS  # the worker's platforms: a message of another would be dead-lettered

    if args.platform not in ADAPTERS:
        raise ConfigError(f"--platform {args.platform!r} is not one of {', '.join(sorted(ADAPTERS))}")
    try:
        plan = list(
            plan_messages(rooms=args.rooms, messages=args.messages, pattern=args.pattern, room_prefix=args.room_prefix)
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    run_id = args.run_id or uuid.uuid4().hex[:8]
    settings = load(BridgeSettings)
    if args.to == "kafka":
        target = settings.topic_messages
        reach.kafka_probe(settings, target)  # within seconds, rather than each send's delivery timeout
        sink: _Sink = _KafkaSink(MessageProducer(settings, **reach.kafka_overrides()))
    else:
        target = args.pubsub_topic
        if "/" not in target:
            target = f"projects/{settings.bridge_project}/topics/{target}"
        reach.pubsub_probe(target)
        sink = reach.pubsub("starting a publisher", lambda: _PubsubSink(target))
    return _produce(plan, run_id, args.platform, args.rate, sink, target, args.json)


class _Sink(Protocol):
    """Where produced messages go: Kafka (the SDK) or Pub/Sub."""

    def send(self, message: Message) -> Future[Any]: ...

    def close(self) -> None: ...


class _KafkaSink:
    def __init__(self, producer: MessageProducer) -> None:
        self._producer = producer

    def send(self, message: Message) -> Future[Any]:
        return self._producer.send(message)

    def close(self) -> None:
        self._producer.close()


class _PubsubSink:
    def __init__(self, topic: str) -> None:
        from google.cloud import pubsub_v1  # imported only when publishing to Pub/Sub

        flow = pubsub_v1.types.PublishFlowControl(
            message_limit=10_000, limit_exceeded_behavior=pubsub_v1.types.LimitExceededBehavior.BLOCK
        )
        options = pubsub_v1.types.PublisherOptions(enable_message_ordering=True, flow_control=flow)
        self._publisher = pubsub_v1.PublisherClient(publisher_options=options)
        self._topic = topic

    def send(self, message: Message) -> Future[Any]:
        future: Future[Any] = self._publisher.publish(self._topic, encode(message), ordering_key=message.room_id)
        return future

    def close(self) -> None:
        self._publisher.stop()


def _produce(
    plan: list[PlannedMessage],
    run_id: str,
    platform: str,
    rate: float | None,
    sink: _Sink,
    target: str,
    as_json: bool = False,
) -> int:
    console = Console(stderr=True)
    settled = threading.Condition()
    counts = {"ok": 0, "failed": 0}

    def count(future: Future[Any]) -> None:
        with settled:
            counts["failed" if future.exception() is not None else "ok"] += 1
            settled.notify_all()

    def done() -> int:
        return counts["ok"] + counts["failed"]

    rooms = len({p.room_id for p in plan})
    started = time.monotonic()
    columns: list[Any] = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=console, disable=as_json) as progress:
        task = progress.add_task(f"to {target}", total=len(plan))
        try:
            for i, planned in enumerate(plan):
                if rate:
                    ahead = started + i / rate - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)  # pacing to --rate, not waiting for a condition
                sink.send(planned_to_message(planned, run_id, platform)).add_done_callback(count)
                if i % 100 == 0:
                    progress.update(task, completed=done())
            # Every send settles (confirmed or failed) within the clients' own delivery timeouts.
            with settled:
                while not settled.wait_for(lambda: done() == len(plan), timeout=0.2):
                    progress.update(task, completed=done())
        finally:
            sink.close()
        progress.update(task, completed=done())
    elapsed = time.monotonic() - started
    if as_json:
        print_json(
            {
                "target": target,
                "run_id": run_id,
                "rooms": rooms,
                "planned": len(plan),
                "produced": counts["ok"],
                "failed": counts["failed"],
                "seconds": round(elapsed, 3),
            }
        )
        return 1 if counts["failed"] else 0
    console.print(
        f"produced {counts['ok']} of {len(plan)} messages over {rooms} rooms to {target} in {elapsed:.1f}s "
        f"({counts['ok'] / max(elapsed, 1e-9):.0f}/s), run id {run_id}"
        + (f", {counts['failed']} FAILED" if counts["failed"] else "")
    )
    return 1 if counts["failed"] else 0
