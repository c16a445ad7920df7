"""The delivery pipeline as separate processes on one machine: platform simulator, webhook, workers.

Used by the fault tests, the benchmarks and the demo. Kafka and PostgreSQL are given (the local
launchers or real servers); every service is a real ``inturn <service>`` process, so it can be
killed, frozen or restarted like in production, and the simulator's receipt log is the oracle.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from inturn.kafka import make_producer
from inturn.schemas import Message, encode, now_ms
from inturn.settings import KafkaSettings
from inturn_devtools.process import free_port
from inturn_devtools.receipts import Report, check, load_receipts
from inturn_devtools.services import ServiceProcess
from inturn_devtools.waiting import wait_until

APP_SECRET = "pipeline-app-secret"  # noqa: S105 - a throwaway secret between two local processes
ACCESS_TOKEN = "pipeline-token"  # noqa: S105 - same
PHONE_NUMBER_ID = "100200300"


#: The platforms the pipeline can run on (``inturn.platforms.ADAPTERS`` but the generic one, which the simulator
#: does not speak).
PLATFORMS = ("whatsapp", "messenger", "instagram", "twilio", "telegram")
PAGE_ID = "1122334455"  # Messenger page, Instagram account
TWILIO_ACCOUNT = "AC00000000000000000000000000000001"


def recipient_of(platform: str, room: str, r: int) -> str:
    """The recipient of room ``r`` on ``platform``. Messenger and Instagram echo nothing of a send, so the webhook
    finds the room from the recipient (``INTURN_WEBHOOK_ROOM_FROM_RECIPIENT={recipient}``): the room's id is its
    recipient there."""
    if platform in ("messenger", "instagram"):
        return room
    if platform == "telegram":
        return str(100_000 + r)
    return f"+49170{r:07d}" if platform == "twilio" else f"49170{r:07d}"


def message_value(
    prefix: str, r: int, n: int, filler: str, platform: str = "whatsapp", account: str | None = None
) -> tuple[str, str, bytes]:
    """Message ``n`` of room ``r`` of a workload (room ``{prefix}-{r}``, recipient derived from ``r``): its room id,
    message id and encoded record (``account``: WhatsApp's sending phone_number_id, default ``PHONE_NUMBER_ID``)."""
    room = f"{prefix}-{r}"
    message_id = f"{room}#{n}"
    value = encode(
        Message(
            room_id=room,
            message_id=message_id,
            platform=platform,
            account=(account or PHONE_NUMBER_ID) if platform == "whatsapp" else None,
            recipient=recipient_of(platform, room, r),
            payload={"type": "text", "text": {"body": f"{message_id} {filler}"}},
            created_at_ms=now_ms(),
        )
    )
    return room, message_id, value


class Pipeline:
    """Simulator + webhook + workers wired to one set of topics and one database."""

    def __init__(
        self,
        topics: KafkaSettings,
        postgres_dsn: str,
        workdir: Path,
        *,
        group: str = "inturn-workers",
        sim: dict[str, str] | None = None,
        worker: dict[str, str] | None = None,
        webhook: dict[str, str] | None = None,
        platform: str = "whatsapp",
    ) -> None:
        self.topics = topics
        self.postgres_dsn = postgres_dsn
        self.workdir = workdir
        self.group = group
        self.sim_port = free_port()
        self.webhook_port = free_port()
        self.webhook_internal_port = free_port()  # the webhook's probes and metrics (docs/webhook.md)
        self.sim_env = sim or {}
        self.worker_env = worker or {}
        self.webhook_env = webhook or {}
        self.sim: ServiceProcess | None = None
        self.webhook: ServiceProcess | None = None
        self.workers: dict[str, ServiceProcess] = {}
        self.bridges: list[ServiceProcess] = []
        self.produced: dict[str, list[str]] = {}
        if platform not in PLATFORMS:
            raise ValueError(f"unknown platform {platform!r}: one of {', '.join(PLATFORMS)}")
        self.platform = platform

    @property
    def webhook_url(self) -> str:
        """Base URL of the webhook."""
        return f"http://127.0.0.1:{self.webhook_port}"

    @property
    def sim_url(self) -> str:
        """Base URL of the simulator."""
        return f"http://127.0.0.1:{self.sim_port}"

    def _kafka_env(self) -> dict[str, str]:
        t = self.topics
        return {
            "INTURN_KAFKA_BOOTSTRAP": t.kafka_bootstrap,
            "INTURN_TOPIC_MESSAGES": t.topic_messages,
            "INTURN_TOPIC_ACKS": t.topic_acks,
            "INTURN_TOPIC_EVENTS": t.topic_events,
            "INTURN_TOPIC_DLQ": t.topic_dlq,
            "INTURN_TOPIC_STATUSES": t.topic_statuses,
            "INTURN_LOG_FORMAT": "json",
        }

    def start_sim(self) -> ServiceProcess:
        """Start the platform simulator, calling the webhook back."""
        env = {
            "INTURN_SIM_HOST": "127.0.0.1",
            "INTURN_SIM_PORT": str(self.sim_port),
            "INTURN_SIM_WEBHOOK_URL": f"http://127.0.0.1:{self.webhook_port}/webhooks/whatsapp",
            "INTURN_SIM_APP_SECRET": APP_SECRET,
            "INTURN_SIM_ACCESS_TOKEN": ACCESS_TOKEN,
            "INTURN_SIM_RATE_LIMIT_PER_S": "100000",
            "INTURN_SIM_RECEIPTS_PATH": str(self.workdir / "receipts.jsonl"),
            "INTURN_SIM_MESSENGER_WEBHOOK_URL": f"{self.webhook_url}/webhooks/messenger",
            "INTURN_SIM_INSTAGRAM_WEBHOOK_URL": f"{self.webhook_url}/webhooks/instagram",
            "INTURN_SIM_TWILIO_AUTH_TOKEN": ACCESS_TOKEN,
            "INTURN_LOG_FORMAT": "json",
            **self.sim_env,
        }
        self.sim = ServiceProcess("sim", ["sim"], env, self.workdir, f"{self.sim_url}/healthz").start()
        return self.sim

    def start_webhook(self, **extra: str) -> ServiceProcess:
        """Start the webhook, publishing acks to the topics (``extra``: more environment, e.g. another bootstrap)."""
        env = {
            **self._kafka_env(),
            "INTURN_WEBHOOK_HOST": "127.0.0.1",
            "INTURN_WEBHOOK_PORT": str(self.webhook_port),
            "INTURN_WEBHOOK_INTERNAL_PORT": str(self.webhook_internal_port),
            "INTURN_WEBHOOK_APP_SECRETS": APP_SECRET,
            "INTURN_WEBHOOK_VERIFY_TOKEN": "pipeline-verify",
            "INTURN_WEBHOOK_TWILIO_AUTH_TOKENS": ACCESS_TOKEN,
            "INTURN_WEBHOOK_ROOM_FROM_RECIPIENT": "{recipient}",  # Messenger's and Instagram's rooms: see recipient_of
            **self.webhook_env,
            **extra,
        }
        self.webhook = ServiceProcess(
            "webhook", ["webhook"], env, self.workdir, f"http://127.0.0.1:{self.webhook_internal_port}/healthz"
        ).start()
        return self.webhook

    def start_bridge(self, pubsub_host: str, project: str, subscription: str, name: str = "bridge") -> ServiceProcess:
        """Start a pull-mode bridge from ``subscription`` to the messages topic."""
        port = free_port()
        env = {
            **self._kafka_env(),
            "PUBSUB_EMULATOR_HOST": pubsub_host,
            "INTURN_BRIDGE_MODE": "pull",
            "INTURN_BRIDGE_PROJECT": project,
            "INTURN_BRIDGE_SUBSCRIPTION": subscription,
            "INTURN_BRIDGE_HTTP_HOST": "127.0.0.1",
            "INTURN_BRIDGE_INTERNAL_PORT": str(port),
        }
        bridge = ServiceProcess(name, ["bridge"], env, self.workdir, f"http://127.0.0.1:{port}/healthz").start()
        self.bridges.append(bridge)
        return bridge

    def add_worker(self, name: str, **env: str) -> ServiceProcess:
        """Start one more worker process in the group."""
        worker_env = self.worker_settings_env(name, **env)
        health = f"http://127.0.0.1:{worker_env['INTURN_WORKER_HTTP_PORT']}/healthz"
        worker = ServiceProcess(name, ["worker"], worker_env, self.workdir, health)
        self.workers[name] = worker.start()
        return worker

    def worker_settings_env(self, name: str, **env: str) -> dict[str, str]:
        """The environment of a worker of this pipeline (its own free HTTP port), plus ``env``."""
        port = free_port()
        return {
            **self._kafka_env(),
            "INTURN_POSTGRES_DSN": self.postgres_dsn,
            "INTURN_WORKER_GROUP_ID": self.group,
            "INTURN_WORKER_ID": name,
            "INTURN_WORKER_HTTP_HOST": "127.0.0.1",
            "INTURN_WORKER_HTTP_PORT": str(port),
            "INTURN_WHATSAPP_BASE_URL": self.sim_url,
            "INTURN_WHATSAPP_ACCESS_TOKEN": ACCESS_TOKEN,
            "INTURN_WHATSAPP_PHONE_NUMBER_ID": PHONE_NUMBER_ID,
            "INTURN_WORKER_RATE_LIMIT_PER_S": "100000",
            "INTURN_WORKER_RATE_BURST": "100000",
            # Every platform on the simulator, each under its own path; room and message in a header for its log.
            "INTURN_PLATFORM_CALLBACK_HEADER": "true",
            "INTURN_MESSENGER_BASE_URL": f"{self.sim_url}/messenger",
            "INTURN_MESSENGER_PAGE_ACCESS_TOKEN": ACCESS_TOKEN,
            "INTURN_MESSENGER_PAGE_ID": PAGE_ID,
            "INTURN_INSTAGRAM_BASE_URL": f"{self.sim_url}/instagram",
            "INTURN_INSTAGRAM_ACCESS_TOKEN": ACCESS_TOKEN,
            "INTURN_INSTAGRAM_ACCOUNT_ID": PAGE_ID,
            "INTURN_TWILIO_BASE_URL": f"{self.sim_url}/twilio",
            "INTURN_TWILIO_ACCOUNT_SID": TWILIO_ACCOUNT,
            "INTURN_TWILIO_AUTH_TOKEN": ACCESS_TOKEN,
            "INTURN_TWILIO_FROM": "+15005550006",
            "INTURN_TWILIO_STATUS_CALLBACK_URL": f"{self.webhook_url}/webhooks/twilio",
            "INTURN_TELEGRAM_BASE_URL": f"{self.sim_url}/telegram",
            "INTURN_TELEGRAM_BOT_TOKEN": ACCESS_TOKEN,
            **self.worker_env,
            **env,
        }

    def worker_gauge(self, name: str, metric: str, timeout: float = 5.0) -> float | None:
        """A gauge from a worker's /metrics (None when the worker does not answer in ``timeout``)."""
        worker = self.workers[name]
        if not worker.health_url:
            return None
        url = worker.health_url.rsplit("/", 1)[0] + "/metrics"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - loopback
                for line in resp.read().decode().splitlines():
                    if line.startswith(metric + " "):
                        return float(line.split()[1])
        except OSError:
            return None
        return None

    def wait_balanced(self, within: float = 60.0) -> None:
        """Wait until every worker owns some of the messages partitions and together they own all: the group
        has settled, so a fault injected next does not also land on the workers' first rebalance."""
        owned: list[float | None] = []

        def settled() -> bool:
            owned[:] = [self.worker_gauge(name, "inturn_worker_assigned_partitions") for name in self.workers]
            return (
                all(n is not None and n > 0 for n in owned)
                and sum(n or 0 for n in owned) == self.topics.topic_partitions
            )

        wait_until(
            settled,
            within,
            lambda: f"workers owning all {self.topics.topic_partitions} partitions (own {owned})",
            every=0.2,
        )

    def produce(
        self,
        rooms: int,
        per_room: int,
        *,
        prefix: str = "room",
        payload_bytes: int = 0,
        platform: str | None = None,
        accounts: tuple[str, ...] = (),
    ) -> int:
        """Produce ``per_room`` messages to each of ``rooms`` rooms, interleaved, on ``platform`` (default: the
        pipeline's); room ``r`` sends from ``accounts[r % len(accounts)]`` when given; returns how many."""
        platform = platform or self.platform
        producer = make_producer(self.topics)
        filler = "x" * payload_bytes
        count = 0
        for n in range(per_room):
            for r in range(rooms):
                account = accounts[r % len(accounts)] if accounts else None
                room, message_id, value = message_value(prefix, r, n, filler, platform, account)
                producer.produce(self.topics.topic_messages, key=room, value=value)
                self.produced.setdefault(room, []).append(message_id)
                count += 1
                if count % 10_000 == 0:
                    producer.poll(0)
        if producer.flush(60) != 0:
            raise RuntimeError("could not produce every message")
        return count

    def receipts(self) -> list[dict[str, Any]]:
        """The simulator's receipt log (device order per recipient)."""
        return load_receipts(self.sim_url)

    def stats(self) -> dict[str, Any]:
        """The simulator's counters."""
        with urllib.request.urlopen(f"{self.sim_url}/_sim/stats", timeout=10) as resp:  # noqa: S310 - loopback
            return dict(json.loads(resp.read()))

    def configure_sim(self, knobs: dict[str, Any]) -> None:
        """Change the simulator's knobs at run time (``POST /_sim/config``), e.g. ``withhold_recipients``."""
        request = urllib.request.Request(  # noqa: S310 - loopback
            f"{self.sim_url}/_sim/config",
            data=json.dumps(knobs).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=60) as resp:  # noqa: S310 - loopback
            resp.read()

    def report(self) -> Report:
        """Lost, duplicated and reordered messages per room, judged from the receipt log."""
        return check(self.receipts(), self.produced)

    def stop(self) -> None:
        """Stop every process (bridges, then workers, so they drain while the platform still answers)."""
        for bridge in self.bridges:
            bridge.stop()
        for worker in self.workers.values():
            worker.stop()
        for service in (self.webhook, self.sim):
            if service is not None:
                service.stop()
