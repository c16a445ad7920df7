"""Webhook throughput: callbacks/s of one webhook process against the same server's bare request rate.

Starts its own Kafka broker (``LocalKafka``), then, one after the other, the same webhook application (one
process) under each candidate server: ``inturn webhook`` (uvicorn with uvloop and httptools, what production
runs), uvicorn with h11, and granian when it is installed. The load comes from ``wrk`` (C, one thread,
``CONNECTIONS`` keep-alive connections, ``BATCHED_CONNECTIONS`` for batched callbacks, each sending its next
request as soon as the answer came), which sends pre-signed requests read from a file
(``benchmarks/wrk_requests.lua``), so the generator costs little CPU (reported: ``wrk_cpu_us``) and keeps
enough requests in flight that the server, not the wait for Kafka's confirmation, sets the rate.
Per server, in rounds (A/B/C, A/B/C, ...):

- ``baseline_healthz``: ``GET /healthz``, answered as plain ASGI before FastAPI: the cheapest answer the
  server gives, its bare HTTP round trip; the ratio target is measured against it;
- ``baseline_fastapi``: ``GET /readyz``, a FastAPI route (routing, a handler, a Response object), reported
  beside it;
- ``single``: one status per callback (how platforms call: once per status), each status a new one;
- ``batched`` (``inturn webhook`` only, once): signed Meta callbacks carrying 100 statuses each.

Every callback is answered 200 only after Kafka confirmed its acks; afterwards the acks topic is counted to
prove every answered status was published (at most the requests still in flight when wrk stopped are
published unanswered). Figures: wall-clock rates, server CPU per request (/proc, every thread of the
webhook process, librdkafka's included), wrk's CPU per request, and the mean wait for Kafka's confirmation
(the webhook's own histogram).
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
from confluent_kafka import TopicPartition

from benchmarks import code_version
from inturn import topics
from inturn.kafka import make_admin, make_consumer, make_producer
from inturn.schemas import encode_callback_data
from inturn.settings import KafkaSettings
from inturn_devtools import LocalKafka
from inturn_devtools.process import free_port
from inturn_devtools.waiting import wait_until
from inturn_webhook.signature import sign

SECRET = "bench-secret"  # noqa: S105 - signs the benchmark's own requests to its own throwaway server
CONNECTIONS = 256  # requests in flight: a platform delivering callbacks in parallel
BATCHED_CONNECTIONS = 32  # 100 statuses each: 3,200 in flight already
ROOMS = 2000
BATCH = 100  # statuses per batched callback
#: Requests prepared per second of a run, above any rate one process reaches here (a run that would wrap
#: around its file and replay statuses fails instead).
SINGLE_PER_S = 20_000  # a quiet box reached 10,267 single-status callbacks/s
BATCHED_PER_S = 1_500  # and more than 600 batched ones (the run ran out of prepared requests)
LUA = Path(__file__).with_name("wrk_requests.lua")
CONFIRM = "inturn_webhook_kafka_confirm_seconds"


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` and its descendants (granian serves from a child process)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return own + sum(_cpu_seconds(int(child)) for child in children)


def _payload(first: int, count: int) -> bytes:
    statuses = [
        {
            "id": f"wamid.{i}",
            "status": "sent",
            "timestamp": "1700000000.123",
            "recipient_id": f"49170{i % ROOMS:06d}",
            "biz_opaque_callback_data": encode_callback_data(f"room-{i % ROOMS}", f"m-{i}"),
        }
        for i in range(first, first + count)
    ]
    value = {"messaging_product": "whatsapp", "metadata": {"phone_number_id": "1055500"}, "statuses": statuses}
    return orjson.dumps({"object": "whatsapp_business_account", "entry": [{"changes": [{"value": value}]}]})


def _callbacks(path: Path, first: int, requests: int, batch: int) -> Path:
    """``requests`` signed callbacks of ``batch`` new statuses each, from status ``first`` on, for wrk."""
    with path.open("wb") as out:
        for i in range(requests):
            body = _payload(first + i * batch, batch)
            out.write(
                b"POST\t/webhooks/whatsapp\tX-Hub-Signature-256\t%s\t%s\n"
                % (sign(body, SECRET.encode()).encode(), body)
            )
    return path


def _wrk(url: str, requests: Path, seconds: int, connections: int) -> dict[str, Any]:
    """One wrk run; its summary, and its own CPU seconds (loading the file included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{seconds}s",
            "--timeout",
            "30s",
            "-s",
            str(LUA),
            url,
            "--",
            str(requests),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    summary["wrk_cpu_s"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return summary


def _confirmations(base: str) -> tuple[float, float]:
    """(requests that waited for Kafka, seconds they waited) so far, from the webhook's /metrics."""
    found = {"count": 0.0, "sum": 0.0}
    for line in httpx.get(f"{base}/metrics", timeout=10).text.splitlines():
        for kind in found:
            if line.startswith(f"{CONFIRM}_{kind} "):
                found[kind] = float(line.split()[1])
    return found["count"], found["sum"]


class Server:
    """One webhook process under one server, and what the runs against it sent."""

    def __init__(
        self,
        name: str,
        command: list[str],
        settings: KafkaSettings,
        port: int,
        internal: int,
        broker_pid: int | None = None,
    ) -> None:
        self.name = name
        self.broker_pid = broker_pid  # the Kafka broker's CPU is reported too: it shares the box's CPUs
        self.base = f"http://127.0.0.1:{port}"
        self.internal = f"http://127.0.0.1:{internal}"  # probes and metrics (inturn webhook: its internal port)
        self.proc = _start_webhook(settings, port, internal, command)
        self.answered = 0  # statuses answered 200
        self.unanswered = 0  # at most this many more were in flight when a run stopped

    def run(self, name: str, path: str, requests: Path, lines: int, seconds: int, batch: int) -> dict[str, Any]:
        """wrk against ``path`` for ``seconds``; figures per request."""
        cpu0, confirmed0 = _cpu_seconds(self.proc.pid), _confirmations(self.internal)
        broker0 = _cpu_seconds(self.broker_pid) if self.broker_pid else 0.0
        connections = BATCHED_CONNECTIONS if batch > 1 else CONNECTIONS
        base = self.base if path.startswith("/webhooks/") else self.internal
        summary = _wrk(base + path, requests, seconds, connections)
        cpu, confirmed = _cpu_seconds(self.proc.pid) - cpu0, _confirmations(self.internal)
        broker_cpu = _cpu_seconds(self.broker_pid) - broker0 if self.broker_pid else None
        n = summary["requests"]
        if any(summary["errors"].values()) or not n:
            raise RuntimeError(f"{self.name} {name}: {n} requests, errors {summary['errors']}")
        if n + connections > lines:
            constant = "BATCHED_PER_S" if batch > 1 else "SINGLE_PER_S"
            raise RuntimeError(f"{self.name} {name}: {n} requests of {lines} prepared: raise {constant}")
        if batch:
            self.answered += n * batch
            self.unanswered += connections * batch
        waits, waited = confirmed[0] - confirmed0[0], confirmed[1] - confirmed0[1]
        seconds_run = summary["duration_us"] / 1e6
        result = {
            "requests": n,
            "seconds": round(seconds_run, 3),
            "requests_per_s": round(n / seconds_run, 1),
            "server_cpu_s": round(cpu, 3),
            "server_cpu_us": round(cpu / n * 1e6, 1),
            "wrk_cpu_us": round(summary["wrk_cpu_s"] / n * 1e6, 1),
            "latency_p50_ms": round(summary["latency_p50_us"] / 1000, 1),
            "latency_p99_ms": round(summary["latency_p99_us"] / 1000, 1),
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
        if batch:
            result |= {"statuses": n * batch, "statuses_per_s": round(n * batch / seconds_run, 1)}
        if batch and broker_cpu is not None:  # the broker's share of the box per callback (Java, all its threads)
            result["broker_cpu_us"] = round(broker_cpu / n * 1e6, 1)
        if batch and waits:  # (a probe run only sees the previous run's last requests confirmed)
            result["kafka_confirm_ms_mean"] = round(waited / waits * 1000, 2)
        print(f"  {self.name} {name}: {result}", flush=True)
        return result

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


#: How long the fresh broker is warmed before any server is measured, and at what rate (records/s).
BROKER_WARM_S = 40
BROKER_WARM_RATE = 6000


def warm_broker(settings: KafkaSettings, broker_pid: int, seconds: float) -> dict[str, Any]:
    """Produce acks-sized records to topics of their own (``warmup.*``, as many partitions), as the webhook's
    producer does (idempotent, ``linger.ms`` 10), for ``seconds``. Without it the benchmark's fresh broker spent
    114-119 µs of CPU per single-status callback (``broker_cpu_us``), against 11-20 µs for a broker that had run
    for 45 minutes; on this two-CPU box that CPU is taken from the webhook and wrk (docs/webhook.md, Issue 18,
    second pass). Returns the broker's CPU per record over the first and the last second of it."""
    warm = KafkaSettings(kafka_bootstrap=settings.kafka_bootstrap, topic_partitions=12, **topics.prefixed("warmup"))
    topics.create(make_admin(warm), warm)
    producer = make_producer(warm, **{"linger.ms": 10})
    value = b"x" * 330
    per_second: list[float] = []
    sent = 0
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < seconds:
        cpu0, sent0 = _cpu_seconds(broker_pid), sent
        second_ends = start + len(per_second) + 1
        while time.monotonic() < second_ends:
            due = int((time.monotonic() - start) * BROKER_WARM_RATE)
            for _ in range(due - sent):
                producer.produce(warm.topic_acks, value=value, key=f"room-{sent % ROOMS}")
                sent += 1
            producer.poll(0.001)
        per_second.append((_cpu_seconds(broker_pid) - cpu0) / max(sent - sent0, 1) * 1e6)
    producer.flush(30)
    return {
        "seconds": round(elapsed, 1),
        "records": sent,
        "broker_cpu_us_first_second": round(per_second[0], 1),
        "broker_cpu_us_last_second": round(per_second[-1], 1),
    }


def _acks_published(settings: KafkaSettings) -> int:
    consumer = make_consumer(settings, "bench-count")
    try:
        parts = consumer.list_topics(settings.topic_acks, timeout=10).topics[settings.topic_acks].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(settings.topic_acks, p), 10)[1] for p in parts)
    finally:
        consumer.close()


def _server_command(server: str, port: int) -> list[str] | None:
    """How to serve the webhook application with ``server``; None when that server is not installed."""
    if server == "uvicorn_httptools":  # what ``inturn webhook`` runs (inturn_webhook.serve)
        return [sys.executable, "-m", "inturn_cli.main", "webhook"]
    app = "inturn_webhook.app:app_from_env"
    if server == "uvicorn_h11":
        return [sys.executable, "-m", "uvicorn", app, "--factory", "--loop", "uvloop", "--http", "h11",
                "--host", "127.0.0.1", "--port", str(port), "--no-access-log", "--log-level", "warning"]  # fmt: skip
    if server == FLOOR:  # the least any webhook must do, served as ``inturn webhook`` serves (benchmarks.floor_webhook)
        return [sys.executable, "-m", "uvicorn", "benchmarks.floor_webhook:app", "--factory", "--loop", "uvloop",
                "--http", "httptools", "--host", "127.0.0.1", "--port", str(port), "--no-access-log",
                "--no-proxy-headers", "--log-level", "warning"]  # fmt: skip
    if server == "granian" and importlib.util.find_spec("granian") is not None:
        return [sys.executable, "-m", "granian", "--interface", "asgi", "--factory", "--loop", "uvloop",
                "--workers", "1", "--host", "127.0.0.1", "--port", str(port), "--no-access-log",
                "--log-level", "warning", app]  # fmt: skip
    return None


def _start_webhook(settings: KafkaSettings, port: int, internal: int, command: list[str]) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "INTURN_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "INTURN_WEBHOOK_APP_SECRETS": SECRET,
        "INTURN_WEBHOOK_HOST": "127.0.0.1",
        "INTURN_WEBHOOK_PORT": str(port),
        "INTURN_WEBHOOK_INTERNAL_PORT": str(internal if internal != port else free_port()),
        "INTURN_LOG_LEVEL": "WARNING",
        "INTURN_LOG_FORMAT": "json",
    }
    proc = subprocess.Popen(command, env=env)
    try:
        wait_until(
            lambda: httpx.get(f"http://127.0.0.1:{internal}/readyz", timeout=1).status_code == 200,
            60,
            "the webhook ready",
            every=0.2,
            ignore=(httpx.TransportError,),  # not listening yet
            proc=proc,
        )
    except (TimeoutError, RuntimeError):
        proc.kill()
        raise
    return proc


def _pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Runs of one kind as one: requests over their summed time and CPU; each run's rate in order."""
    requests = sum(r["requests"] for r in runs)
    seconds = sum(r["seconds"] for r in runs)
    cpu = sum(r["server_cpu_s"] for r in runs)
    pooled: dict[str, Any] = {
        "requests": requests,
        "seconds": round(seconds, 3),
        "requests_per_s": round(requests / seconds, 1),
        "server_cpu_s": round(cpu, 3),
        "server_cpu_us": round(cpu / requests * 1e6, 1),
        "wrk_cpu_us": round(sum(r["wrk_cpu_us"] * r["requests"] for r in runs) / requests, 1),
        "requests_per_s_runs": [r["requests_per_s"] for r in runs],
        "server_cpu_us_runs": [r["server_cpu_us"] for r in runs],
        "load_average_1m_runs": [r["load_average_1m"] for r in runs],
    }
    if all("statuses" in r for r in runs):
        statuses = sum(r["statuses"] for r in runs)
        pooled |= {"statuses": statuses, "statuses_per_s": round(statuses / seconds, 1)}
    if confirms := [r["kafka_confirm_ms_mean"] for r in runs if "kafka_confirm_ms_mean" in r]:
        pooled["kafka_confirm_ms_mean_runs"] = confirms
    if brokers := [r["broker_cpu_us"] for r in runs if "broker_cpu_us" in r]:
        pooled["broker_cpu_us_runs"] = brokers
    return pooled


class Files:
    """The request files every server is driven with (the same statuses for each: every server is a new
    process, with no memory of what another published)."""

    def __init__(self, workdir: Path, seconds: int, rounds: int) -> None:
        def fixed(name: str, path: str) -> Path:
            file = workdir / name
            file.write_text(f"GET\t{path}\t\t\t\n")
            return file

        self.seconds = seconds
        self.healthz, self.readyz = fixed("healthz", "/healthz"), fixed("readyz", "/readyz")
        self.single_lines = int(SINGLE_PER_S * seconds) + CONNECTIONS
        self.warm = _callbacks(workdir / "warm", 1, self.single_lines, 1)
        self.single = [_callbacks(workdir / f"single{r}", 10**7 * (r + 1), self.single_lines, 1) for r in range(rounds)]
        self.batched_lines = int(BATCHED_PER_S * seconds) + BATCHED_CONNECTIONS
        self.batched = _callbacks(workdir / "batched", 10**9, self.batched_lines, BATCH)


def _serve(server: Server, files: Files, batched: bool, fastapi: bool = True) -> dict[str, Any]:
    """One server: rounds of /healthz, /readyz (``fastapi``: the application has FastAPI routes) and single-status
    callbacks, then batched callbacks if asked."""
    seconds = files.seconds
    server.run("warm-up", "/webhooks/whatsapp", files.warm, files.single_lines, seconds, 1)
    runs: dict[str, list[dict[str, Any]]] = {"healthz": [], "fastapi": [], "single": []}
    for callbacks in files.single:
        runs["healthz"].append(server.run("healthz", "/healthz", files.healthz, 1 << 62, seconds, 0))
        if fastapi:
            runs["fastapi"].append(server.run("readyz", "/readyz", files.readyz, 1 << 62, seconds, 0))
        runs["single"].append(server.run("single", "/webhooks/whatsapp", callbacks, files.single_lines, seconds, 1))
    healthz, single = _pooled(runs["healthz"]), _pooled(runs["single"])
    result: dict[str, Any] = {
        "baseline_healthz": healthz,
        "single": single | {"statuses_per_s": single["requests_per_s"]},
        "single_vs_baseline_request_ratio": round(single["requests_per_s"] / healthz["requests_per_s"], 3),
        "single_vs_baseline_ratio_runs": [
            round(s["requests_per_s"] / h["requests_per_s"], 3)
            for s, h in zip(runs["single"], runs["healthz"], strict=True)
        ],
        "single_vs_baseline_cpu_ratio": round(single["server_cpu_us"] / healthz["server_cpu_us"], 3),
    }
    if fastapi:
        routed = result["baseline_fastapi"] = _pooled(runs["fastapi"])
        result["single_vs_fastapi_request_ratio"] = round(single["requests_per_s"] / routed["requests_per_s"], 3)
    if batched:
        result["batched"] = _pooled(
            [server.run("batched", "/webhooks/whatsapp", files.batched, files.batched_lines, seconds, BATCH)]
        )
    return result


#: The floor (``benchmarks.floor_webhook``), measured as a server of its own.
FLOOR = "floor_uvicorn_httptools"
#: The servers measured side by side, the first one being what ``inturn webhook`` runs, the floor the last.
SERVERS = ("uvicorn_httptools", "uvicorn_h11", "granian", FLOOR)
#: Servers started with one port: the webhook answers its probes and metrics only on its internal port, which
#: ``inturn webhook`` binds beside the public one and these do not.
ONE_PORT = ("uvicorn_h11", "granian")
ONE_PORT_REASON = "serves one port; the webhook's /healthz and /metrics are on an internal port (docs/webhook.md)"


def run(quick: bool) -> dict[str, Any]:
    """Every candidate server against the same fresh broker: bare requests, one and many statuses per callback."""
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed (scripts/setup-system.sh installs it: apt-get install wrk)")
    seconds, rounds = (2, 1) if quick else (5, 3)
    servers: dict[str, Any] = {}
    answered = unanswered = 0
    workdir = Path(tempfile.mkdtemp(prefix="inturn-bench-webhook-"))
    try:
        files = Files(workdir, seconds, rounds)
        with LocalKafka() as broker:
            settings = KafkaSettings(kafka_bootstrap=broker.bootstrap, topic_partitions=12)
            topics.create(make_admin(settings), settings)
            warmed = warm_broker(settings, broker.pid or 0, 5 if quick else BROKER_WARM_S)
            print(f" broker warmed: {warmed}", flush=True)
            for i, name in enumerate(SERVERS):
                command = _server_command(name, port := free_port())
                if command is None:
                    servers[name] = {"skipped": "not installed"}
                    continue
                if name in ONE_PORT:
                    servers[name] = {"skipped": ONE_PORT_REASON}
                    continue
                print(f" server {name}", flush=True)
                internal = free_port() if name != FLOOR else port  # the floor answers /healthz on its one port
                server = Server(name, command, settings, port, internal, broker.pid)
                try:
                    servers[name] = _serve(server, files, batched=i == 0, fastapi=name != FLOOR)
                finally:
                    server.stop()
                answered += server.answered
                unanswered += server.unanswered
            on_topic = _acks_published(settings)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if not answered <= on_topic <= answered + unanswered:
        raise RuntimeError(
            f"acks topic holds {on_topic} records; {answered} statuses answered (+{unanswered} in flight)"
        )
    ours = servers[SERVERS[0]]
    floor = servers[FLOOR]
    return {
        "setup": {
            "generator": f"wrk, 1 thread, {CONNECTIONS} connections, {seconds:g} s a run, {rounds} round(s)",
            "connections": CONNECTIONS,
            "connections_batched": BATCHED_CONNECTIONS,
            "baseline": "GET /healthz answered as plain ASGI before FastAPI (the cheapest answer the server gives)",
            "baseline_fastapi": "GET /readyz, a FastAPI route",
            "statuses_per_batched_request": BATCH,
            "partitions": 12,
            "webhook_workers": 1,
            "server": SERVERS[0],
            "acks_on_topic": on_topic,
            "statuses_answered": answered,
            "note": "broker, webhook and wrk share this machine's CPUs",
            "broker_warm_up": warmed,
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
            "cpus": len(os.sched_getaffinity(0)),
        },
        "baseline_healthz": ours["baseline_healthz"],
        "baseline_fastapi": ours["baseline_fastapi"],
        "batched": ours["batched"],
        "single": ours["single"],
        "servers": {name: _summary(result) for name, result in servers.items()},
        "target_statuses_per_s": 5000,
        "batched_statuses_per_s_vs_target": round(ours["batched"]["statuses_per_s"] / 5000, 2),
        "single_vs_baseline_request_ratio": ours["single_vs_baseline_request_ratio"],
        "single_vs_fastapi_request_ratio": ours["single_vs_fastapi_request_ratio"],
        "target_single_vs_baseline": 0.6,
        "target_single_per_s": 4000,
        # The webhook's CPU per single-status callback against the floor's (benchmarks.floor_webhook), same run.
        "single_cpu_vs_floor": round(ours["single"]["server_cpu_us"] / floor["single"]["server_cpu_us"], 3),
        "floor_single_vs_baseline_request_ratio": floor["single_vs_baseline_request_ratio"],
        "code": code_version(),
    }


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    """A server's figures side by side with the others' (rates and server CPU per request)."""
    if "skipped" in result:
        return result
    baseline, single = result["baseline_healthz"], result["single"]
    summary = {
        "healthz_requests_per_s": baseline["requests_per_s"],
        "healthz_server_cpu_us": baseline["server_cpu_us"],
        "single_callbacks_per_s": single["requests_per_s"],
        "single_server_cpu_us": single["server_cpu_us"],
        "single_vs_baseline_request_ratio": result["single_vs_baseline_request_ratio"],
        "single_vs_baseline_ratio_runs": result["single_vs_baseline_ratio_runs"],
    }
    if fastapi := result.get("baseline_fastapi"):
        summary |= {
            "fastapi_requests_per_s": fastapi["requests_per_s"],
            "fastapi_server_cpu_us": fastapi["server_cpu_us"],
            "single_vs_fastapi_request_ratio": result["single_vs_fastapi_request_ratio"],
        }
    return summary
