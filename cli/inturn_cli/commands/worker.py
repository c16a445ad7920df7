"""``inturn worker``: run a worker process."""

from __future__ import annotations

import argparse

from inturn.logs import configure
from inturn.settings import load
from inturn.settings.worker import WorkerSettings
from inturn_cli.flags import given


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``worker``."""
    parser = sub.add_parser(
        "worker",
        help="deliver messages of the rooms on this worker's partitions, in turn",
        description="Join the consumer group on the messages topic and send each room's messages in turn: "
        "message N+1 only after N was acked (through the acks topic) or timed out. Settings: INTURN_WORKER_*, "
        "INTURN_KAFKA_*, INTURN_POSTGRES_*, INTURN_WHATSAPP_*, INTURN_GENERIC_* (docs/configuration.md). "
        "SIGTERM drains gracefully; a second signal exits at once.",
    )
    parser.add_argument("--mode", choices=["ack", "none", "fixed-delay", "partition"], help="INTURN_WORKER_MODE")
    parser.add_argument("--http-port", type=int, help="port of /metrics, /healthz, /readyz (INTURN_WORKER_HTTP_PORT)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    settings = load(WorkerSettings, **given(args, mode="worker_mode", http_port="worker_http_port"))
    configure(settings.log_format, settings.log_level)
    from inturn_worker.app import main

    main(settings)
    return 0
