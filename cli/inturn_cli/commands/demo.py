"""``inturn demo``: the whole pipeline locally, once per ordering mode, and what each did."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``demo``."""
    parser = sub.add_parser(
        "demo",
        help="run the whole pipeline locally and compare the ordering modes",
        description="Start Kafka, PostgreSQL and the Pub/Sub emulator locally; for the modes none, fixed-delay "
        "and ack run a platform simulator (latency, lost callbacks), the webhook, two workers and the bridge; "
        "publish messages of hundreds of rooms to Pub/Sub; run the Spark report; print a table and the report's "
        "path; stop everything. Exit 1 if a message was lost or ack mode delivered a room out of order.",
    )
    parser.add_argument("--rooms", type=int, default=300, help="rooms per mode (default 300)")
    parser.add_argument("--messages", type=int, default=3000, help="messages per mode (default 3000)")
    parser.add_argument("--out", type=Path, default=Path("var/demo"), help="where the report goes (var/demo)")
    parser.add_argument(
        "--platform",
        choices=("whatsapp", "messenger", "instagram", "twilio", "telegram"),
        default="whatsapp",
        help="the platform the simulator plays and every message names (default whatsapp); Messenger acks by "
        "delivery watermark, Instagram and Telegram by the send's answer, WhatsApp and Twilio per message",
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from inturn_devtools.demo import run

    return run(rooms=args.rooms, messages=args.messages, out=args.out, platform=args.platform)
