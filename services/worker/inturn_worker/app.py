"""The worker's lifecycle: start, run, drain on SIGTERM/SIGINT, close.

Start-up fails fast: bad settings, missing topics or mismatched partition counts, or an
unreachable PostgreSQL stop the process with a clear error. A first signal starts a bounded drain
(readiness goes false, intake stops, in-flight messages get ``worker_revoke_grace_ms``, cursors
and offsets are written); a second signal exits at once.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import sys
import threading

import structlog
from aiohttp import web

from inturn import topics
from inturn.db import migrate
from inturn.db.pool import application_name, create_pool
from inturn.db.store import Store
from inturn.kafka import make_admin, make_producer
from inturn.metrics import worker as m
from inturn.platforms import ADAPTERS, PlatformAdapter
from inturn.runtime import tune_gc
from inturn.schemas import OrderingMode
from inturn.settings.worker import WorkerSettings
from inturn_worker.ack_reader import AckReader
from inturn_worker.acks import AckRouter
from inturn_worker.checkpoint import Checkpoint
from inturn_worker.dead_letters import DeadLetters
from inturn_worker.ends import EndsReader
from inturn_worker.events import EventLog
from inturn_worker.health import describe, start_health_server
from inturn_worker.intake import Batches, Intake
from inturn_worker.partition import Partitions, lease_seconds
from inturn_worker.rebalance import Rebalances
from inturn_worker.room import Delivery, Rooms

log = structlog.get_logger("inturn.worker")

#: The events producer's overrides. Events wait for nothing but the checkpoint (which waits for their
#: confirmation anyway): a longer linger sends them in fewer, larger requests and costs librdkafka's threads
#: less CPU per message.
EVENTS_PRODUCER = {"linger.ms": 50}


class Worker:
    """One worker process: a member of the consumer group with its rooms, acks reader and checkpoint."""

    def __init__(self, settings: WorkerSettings, *, own_process: bool = False) -> None:
        self.settings = settings
        self._own_process = own_process  # process-wide tuning applies only when the worker is the process
        self.draining = False
        self._stop = asyncio.Event()
        self._checkpoint: Checkpoint | None = None
        self._health: web.AppRunner | None = None
        self.http_port: int | None = None

    def stop(self) -> None:
        """Begin the graceful drain (idempotent)."""
        self.draining = True
        m.DRAINING.set(1)
        self._stop.set()

    def _ready(self) -> tuple[bool, dict[str, object]]:
        postgres = self._checkpoint.postgres_ok if self._checkpoint else False
        ok = not self.draining and postgres
        return ok, {"draining": self.draining, "postgres": postgres}

    async def run(self) -> None:
        """Run until ``stop`` (or a signal), then drain and close everything."""
        settings = self.settings
        layout = topics.check(make_admin(settings), settings)
        # Named in pg_stat_activity, so an operator (and the fault matrix) can tell whose session holds what.
        pool = await create_pool(settings, server_settings={"application_name": application_name(settings.worker_id)})
        async with pool.acquire() as conn:
            await migrate(conn)
        events = EventLog(
            make_producer(settings, **EVENTS_PRODUCER),
            settings,
            {settings.topic_events: layout.events or 1, settings.topic_dlq: layout.dlq or 1},
        )
        send_timeout = settings.worker_send_timeout_ms / 1000
        adapters: dict[str, PlatformAdapter] = {
            name: cls(settings, settings.worker_pool_size, send_timeout) for name, cls in ADAPTERS.items()
        }
        router = AckRouter(settings.worker_early_ack_ttl_ms / 1000)
        lease_s = lease_seconds(settings.worker_session_timeout_ms)
        store = Store(pool, settings.topic_messages, lease_s)
        # In the ack-gated modes a new owner reads the terminal events of the look-back before its first send.
        reads_ends = OrderingMode(settings.worker_mode) in (OrderingMode.ACK, OrderingMode.PARTITION)
        parts = Partitions(lease_s, settings.worker_dedup_window, layout.messages, reads_ends)  # the rebalances fill it
        letters = DeadLetters(settings, events, store)
        rooms = Rooms(settings, parts, Delivery(settings, adapters, events, router, letters))
        acks = AckReader(settings, router, events)
        ends = EndsReader(settings, layout.events or 1, acks) if reads_ends else None
        checkpoint = Checkpoint(settings, parts, rooms, events, store)
        rebalances = Rebalances(settings, parts, rooms, ends or acks, checkpoint)
        intake = Intake(settings, parts, Batches(settings, parts, rooms, letters, store), rebalances, checkpoint)
        self._checkpoint = checkpoint
        self._health, self.http_port = await start_health_server(
            settings.worker_http_host,
            settings.worker_http_port,
            self._ready,
            functools.partial(describe, parts),
            settings.worker_room_api_token,
        )
        log.info(
            "worker_started",
            worker_id=settings.worker_id,
            mode=str(settings.worker_mode),
            group=settings.worker_group_id,
            http_port=self.http_port,
            platforms_without_credentials=settings.platforms_without_credentials() or None,
        )
        if self._own_process:
            tune_gc(settings.worker_gc_young_threshold)  # everything built so far lives as long as the process
        tasks = [
            asyncio.create_task(intake.run(), name="intake"),
            asyncio.create_task(acks.run(), name="acks"),
        ]
        stop_wait = asyncio.create_task(self._stop.wait(), name="stop")
        try:
            done, _ = await asyncio.wait([*tasks, stop_wait], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not stop_wait and (failure := task.exception()) is not None:
                    raise failure
        finally:
            self.draining = True
            m.DRAINING.set(1)
            log.info("worker_draining")
            intake.stop()
            await asyncio.wait([tasks[0]], timeout=5)
            await intake.drain_all()  # bounded drain, final checkpoint, commit: still a group member
            await intake.close()
            await acks.close()
            if ends is not None:
                await ends.close()
            await rooms.close()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            stop_wait.cancel()
            await events.confirm(wait_s=10.0)
            for adapter in adapters.values():
                await adapter.close()
            await pool.close()
            await self._health.cleanup()
            log.info("worker_stopped")


def main(settings: WorkerSettings) -> None:
    """Run a worker process with signal handling (a second signal exits at once)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        uvloop = None  # type: ignore[assignment]  # the module or None: asyncio's loop then

    async def run() -> None:
        worker = Worker(settings, own_process=True)
        loop = asyncio.get_running_loop()
        signals = 0

        def on_signal() -> None:
            nonlocal signals
            signals += 1
            if signals > 1:
                log.warning("second_signal_exit")
                os._exit(130)
            worker.stop()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        await worker.run()
        # The shutdown's work is done (drained, checkpointed, committed, events confirmed, consumers closed).
        # What is left is tearing objects down, and librdkafka's rd_kafka_destroy can block intermittently
        # (e.g. on a metadata request in flight); the orchestrator would wait out its grace period and SIGKILL.
        watchdog = threading.Timer(_TEARDOWN_S, _exit_after_stuck_teardown)
        watchdog.daemon = True
        watchdog.start()

    profile_path = os.environ.get("INTURN_WORKER_PROFILE")  # a development aid: cProfile stats written on exit
    profiler = None
    if profile_path:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        if uvloop is not None:
            uvloop.run(run())
        else:
            asyncio.run(run())
    finally:
        if profiler is not None and profile_path:
            profiler.disable()
            profiler.dump_stats(profile_path)
    _exit_now()  # without the interpreter's teardown of librdkafka handles (see above): nothing is left to save


_TEARDOWN_S = 10.0


def _exit_after_stuck_teardown() -> None:
    log.warning("teardown_stuck_exit", waited_s=_TEARDOWN_S)
    _exit_now()


def _exit_now() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
