"""``make demo``: the whole pipeline on one machine, once per ordering mode, side by side.

Kafka, PostgreSQL and the Pub/Sub emulator start locally. For each mode a platform simulator
(realistic latency, lost callbacks, overlapping sends that overtake), the webhook, two workers and
the bridge run as separate processes; a few thousand messages over hundreds of rooms are published
to Pub/Sub in an interleaved order; the simulator's receipt log says what reached each device in
what order. Then the Spark report runs over the events and acks, and a table compares the modes.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from inturn import topics
from inturn.kafka import committed_total, make_admin
from inturn.schemas import now_ms
from inturn.settings import KafkaSettings
from inturn_devtools.pipeline import Pipeline
from inturn_devtools.receipts import Report
from inturn_devtools.stack import LocalStack
from inturn_devtools.waiting import wait_until

MODES = ("none", "fixed-delay", "ack")
PROJECT = "inturn-demo"

#: The platform: 150 ms median latency to the device (p99 600 ms), 12% of status callbacks lost.
SIM = {
    "INTURN_SIM_LATENCY_MEDIAN_MS": "150",
    "INTURN_SIM_LATENCY_P99_MS": "600",
    "INTURN_SIM_LATENCY_MAX_MS": "1500",
    "INTURN_SIM_DROP_RATE": "0.12",
}
#: Twilio calls back once per status, each a request of its own, from many connections at once; 8 senders
#: one status at a time cannot keep up with the demo's rate, and the acks would come seconds late.
SIM_PER_PLATFORM = {"twilio": {"INTURN_SIM_CALLBACK_CONCURRENCY": "64"}}
WORKER = {
    "INTURN_WORKER_ACK_TIMEOUT_MS": "2000",
    "INTURN_WORKER_FIXED_DELAY_MS": "250",
    "INTURN_WORKER_SESSION_TIMEOUT_MS": "10000",
    "INTURN_WORKER_REVOKE_GRACE_MS": "4000",
    "INTURN_LOG_LEVEL": "WARNING",
}


@dataclass
class ModeResult:
    """What one mode's run produced."""

    mode: str
    messages: int
    seconds: float
    device: Report


def _create_subscription(host: str, topic_id: str, subscription_id: str) -> None:
    """The Pub/Sub topic and an ordered subscription on it (what the chat backend's side provides)."""
    os.environ["PUBSUB_EMULATOR_HOST"] = host
    from inturn_bridge.subscription import ensure

    ensure(PROJECT, topic_id, subscription_id, ack_deadline_s=30)


def _publish(
    host: str, topic_id: str, rooms: int, messages: int, run_id: str, platform: str = "whatsapp"
) -> dict[str, list[str]]:
    """Publish round-robin over the rooms (interleaved), ordering key = room; returns each room's order."""
    os.environ["PUBSUB_EMULATOR_HOST"] = host
    from google.cloud import pubsub_v1

    from inturn.schemas import encode
    from inturn.sdk import plan_messages, planned_to_message

    publisher = pubsub_v1.PublisherClient(
        publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True)
    )
    topic = publisher.topic_path(PROJECT, topic_id)
    produced: dict[str, list[str]] = {}
    futures = []
    for planned in plan_messages(rooms=rooms, messages=messages, room_prefix=f"{run_id}-room-"):
        message = planned_to_message(planned, run_id, platform)
        if platform in ("messenger", "instagram"):  # rooms found from the recipient (see Pipeline's recipient_of)
            message = msgspec.structs.replace(message, recipient=message.room_id)
        futures.append(publisher.publish(topic, encode(message), ordering_key=message.room_id))
        produced.setdefault(message.room_id, []).append(message.message_id)
    for future in futures:
        future.result(timeout=60)
    publisher.stop()
    return produced


def _run_mode(
    mode: str,
    stack_env: dict[str, str],
    events_topics: KafkaSettings,
    pg_dsn: str,
    workdir: Path,
    rooms: int,
    messages: int,
    progress: Progress,
    platform: str = "whatsapp",
) -> ModeResult:
    run_id = mode.replace("-", "")
    settings = events_topics.model_copy(update={"topic_messages": f"inturn.demo.{run_id}.messages"})
    topics.create(make_admin(settings), settings)
    line = Pipeline(
        settings,
        pg_dsn,
        workdir / mode,
        group=f"inturn-demo-{run_id}",
        sim={**SIM, **SIM_PER_PLATFORM.get(platform, {})},
        worker={**WORKER, "INTURN_WORKER_MODE": mode},
        platform=platform,
    )
    task = progress.add_task(f"{mode:<11}", total=messages)
    try:
        line.start_sim()
        line.start_webhook()
        line.add_worker(f"{run_id}-w1")
        line.add_worker(f"{run_id}-w2")
        pubsub = stack_env["PUBSUB_EMULATOR_HOST"]
        _create_subscription(pubsub, f"demo-{run_id}", f"demo-{run_id}")
        line.start_bridge(pubsub, PROJECT, f"demo-{run_id}")
        started = time.monotonic()
        line.produced = _publish(pubsub, f"demo-{run_id}", rooms, messages, run_id, platform)
        received = 0

        def delivered() -> bool:
            nonlocal received
            received = len({(r["room_id"], r["message_id"]) for r in line.receipts()})
            progress.update(task, completed=received)
            return received >= messages and committed_total(settings, line.group) >= messages

        wait_until(delivered, 240, lambda: f"{mode}: {messages} delivered (have {received})", every=0.5)
        return ModeResult(mode, messages, time.monotonic() - started, line.report())
    finally:
        line.stop()


def _report(env: dict[str, str], since_ms: int, until_ms: int, out: Path) -> dict[str, dict[str, str]]:
    """Run the Spark report over the demo's events and acks; its summary rows by mode."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "inturn_cli.main",
            "report",
            "--from",
            str(since_ms),
            "--to",
            str(until_ms),
            "--source",
            "kafka",
            "--out",
            str(out),
        ],
        env={**os.environ, **env},
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rows: dict[str, dict[str, str]] = {}
    with (out / "summary.csv").open() as f:
        for row in csv.DictReader(f):
            rows[row["mode"]] = row
    return rows


def run(
    rooms: int = 300,
    messages: int = 3000,
    out: Path | None = None,
    console: Console | None = None,
    platform: str = "whatsapp",
) -> int:
    """The demo on ``platform`` (the simulator speaks each of ``pipeline.PLATFORMS``); returns the process exit
    code (0 when every mode delivered everything and ack mode kept every room in order)."""
    console = console or Console()
    out = out or Path("var/demo")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    console.print("[bold]inturn demo[/bold]: starting Kafka (KRaft), PostgreSQL and the Pub/Sub emulator ...")
    stack = LocalStack()
    state = stack.start()
    stack_env = state.env()
    workdir = Path(tempfile.mkdtemp(prefix="inturn-demo-"))
    shared = KafkaSettings(
        kafka_bootstrap=state.kafka_bootstrap,
        topic_acks="inturn.demo.acks",
        topic_events="inturn.demo.events",
        topic_dlq="inturn.demo.dlq",
        topic_statuses="inturn.demo.statuses",
        topic_partitions=4,
    )
    results: list[ModeResult] = []
    try:
        console.print(f"  stack up in {time.monotonic() - t0:.0f}s; logs in {workdir}")
        console.print(
            f"  {messages} messages over {rooms} rooms per mode, published to Pub/Sub (ordering key = "
            f"room), platform {platform}: 150 ms median latency, 12% of callbacks lost"
        )
        since = now_ms()
        columns: list[TextColumn | BarColumn | MofNCompleteColumn | TimeElapsedColumn] = [
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        ]
        with Progress(*columns, console=console) as progress:
            for mode in MODES:
                results.append(
                    _run_mode(mode, stack_env, shared, state.postgres_dsn, workdir, rooms, messages, progress, platform)
                )
        until = now_ms() + 1
        console.print("running the Spark report ...")
        report_env = {
            "INTURN_KAFKA_BOOTSTRAP": state.kafka_bootstrap,
            "INTURN_TOPIC_EVENTS": shared.topic_events,
            "INTURN_TOPIC_ACKS": shared.topic_acks,
            "INTURN_TOPIC_STATUSES": shared.topic_statuses,
        }
        summary = _report(report_env, since, until, out / "report")
    finally:
        console.print("stopping everything ...")
        stack.stop()
    _print_table(console, results, summary)
    console.print(f"HTML report: [bold]{(out / 'report' / 'report.html').resolve()}[/bold]")
    console.print(f"done in {time.monotonic() - t0:.0f}s")
    ack = next(r for r in results if r.mode == "ack")
    ok = all(r.device.lost == 0 for r in results) and ack.device.reordered == 0
    return 0 if ok else 1


#: The result table's columns and what each means (printed under it): short headers, so that the whole table reads at
#: 80 columns, the width rich gives a console that is not a terminal.
COLUMNS = (
    ("mode", "ordering mode (docs/ordering-modes.md)"),
    ("delivered", "messages that reached the device / messages published"),
    ("out of order", "receipt log: a room's adjacent pairs received in the wrong order"),
    ("report", "the report's figure on the same events (n/m: not measurable)"),
    ("timeouts", "ack timeouts, from the report (a status callback lost or late)"),
    ("p99 e2e", "99th percentile from created at the backend to acked (the report)"),
    ("time", "the mode's run time"),
)


def _print_table(console: Console, results: list[ModeResult], summary: dict[str, dict[str, str]]) -> None:
    table = Table(
        title="per ordering mode: out of order from the receipt log and the report; the rest from the report",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for column, _ in COLUMNS:
        table.add_column(column, justify="right", no_wrap=True)
    fmt: Callable[[str, str], str] = lambda row_key, mode: summary.get(mode, {}).get(row_key, "-")  # noqa: E731 - a named one-liner reads better inline here
    for r in results:
        pairs = sum(max(0, x.produced - 1) for x in r.device.rooms.values())
        table.add_row(
            r.mode,
            f"{r.messages - r.device.lost}/{r.messages}",
            f"{r.device.reordered} ({r.device.reordered / pairs:.1%})" if pairs else "0",
            _reported_order(summary.get(r.mode, {})),
            fmt("ack_timeouts", r.mode),
            f"{float(fmt('e2e_p99_ms', r.mode)):.0f} ms" if fmt("e2e_p99_ms", r.mode) not in ("-", "") else "-",
            f"{r.seconds:.0f}s",
        )
    console.print(table)
    for column, meaning in COLUMNS[1:]:
        console.print(f"  {column}: {meaning}", highlight=False)
    for note in sorted({row["out_of_order_note"] for row in summary.values() if row.get("out_of_order_note")}):
        console.print(f"  not measurable: {note} (docs/reports.md)", highlight=False)


def _reported_order(row: dict[str, str]) -> str:
    """The report's out-of-order rate of a summary row (as the CSV writes it), "n/m" where its platform cannot
    order messages, "-" where the report has no row."""
    if row.get("out_of_order_note"):
        return "n/m"
    rate = row.get("out_of_order_rate", "")
    return f"{float(rate):.1%}" if rate else "-"
