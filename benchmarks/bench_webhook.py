"""Webhook throughput: statuses/s of one webhook process, Kafka publish and confirmation included.

Starts its own Kafka broker (``LocalKafka``), then, one after the other, the same webhook application
(one process) under each candidate server: ``inturn webhook`` (uvicorn with uvloop and httptools, what
production runs), uvicorn with h11, and granian when it is installed. Each is driven over real HTTP from
this process with aiohttp:

- ``baseline``: ``GET /healthz``, the same server's bare HTTP round trip (no work), measured before and
  after the callbacks and pooled;
- ``single``: one status per callback (how platforms call: once per status);
- ``batched`` (``inturn webhook`` only): signed Meta callbacks carrying many statuses each.

Every request is answered 200 only after Kafka confirmed its acks, and the acks topic is counted
afterwards to prove every status was published once. Figures: wall-clock rates, and statuses per
CPU-second of the webhook process (the machine is shared by broker, client and server, so the
CPU-second figure is the fairer "per process" number).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import orjson
from confluent_kafka import TopicPartition

from benchmarks import code_version
from inturn import topics
from inturn.kafka import make_admin, make_consumer
from inturn.schemas import encode_callback_data
from inturn.settings import KafkaSettings
from inturn_devtools import LocalKafka
from inturn_devtools.process import free_port
from inturn_webhook.signature import sign

SECRET = "bench-secret"  # noqa: S105 - signs the benchmark's own requests to its own throwaway server
CONCURRENCY = 32  # requests in flight, as a platform delivering callbacks in parallel
ROOMS = 2000


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


async def _drive(url: str, bodies: list[bytes], method: str = "POST") -> tuple[float, int]:
    """Send every body with ``CONCURRENCY`` requests in flight; (seconds, non-200 answers)."""
    queue = list(reversed(bodies))
    failures = 0
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal failures
            while queue:
                body = queue.pop()
                headers = {"X-Hub-Signature-256": sign(body, SECRET.encode()), "Content-Type": "application/json"}
                async with session.request(method, url, data=body or None, headers=headers) as response:
                    await response.read()
                    failures += response.status != 200

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return time.perf_counter() - started, failures


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
    if server == "granian" and importlib.util.find_spec("granian") is not None:
        return [sys.executable, "-m", "granian", "--interface", "asgi", "--factory", "--loop", "uvloop",
                "--workers", "1", "--host", "127.0.0.1", "--port", str(port), "--no-access-log",
                "--log-level", "warning", app]  # fmt: skip
    return None


def _start_webhook(settings: KafkaSettings, port: int, command: list[str]) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "INTURN_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "INTURN_WEBHOOK_APP_SECRETS": SECRET,
        "INTURN_WEBHOOK_HOST": "127.0.0.1",
        "INTURN_WEBHOOK_PORT": str(port),
        "INTURN_LOG_LEVEL": "WARNING",
        "INTURN_LOG_FORMAT": "json",
    }
    proc = subprocess.Popen(command, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            pass  # not listening yet
        if proc.poll() is not None:
            raise RuntimeError(f"webhook exited with {proc.returncode}")
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("webhook not ready in 60 s")


def _scenario(name: str, proc: subprocess.Popen[bytes], url: str, bodies: list[bytes], statuses: int) -> dict[str, Any]:
    cpu_before = _cpu_seconds(proc.pid)
    seconds, failures = asyncio.run(_drive(url, bodies, "GET" if name == "baseline" else "POST"))
    cpu = _cpu_seconds(proc.pid) - cpu_before
    if failures:
        raise RuntimeError(f"{name}: {failures} requests not answered 200")
    result = {
        "requests": len(bodies),
        "seconds": round(seconds, 3),
        "requests_per_s": round(len(bodies) / seconds, 1),
        "server_cpu_s": round(cpu, 3),
        "requests_per_server_cpu_s": round(len(bodies) / cpu, 1) if cpu else None,
    }
    if statuses:
        result |= {
            "statuses": statuses,
            "statuses_per_s": round(statuses / seconds, 1),
            "statuses_per_server_cpu_s": round(statuses / cpu, 1) if cpu else None,
        }
    print(f"  {name}: {result}", flush=True)
    return result


def _pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Baseline runs as one: requests over their summed time and CPU."""
    requests = sum(r["requests"] for r in runs)
    seconds = sum(r["seconds"] for r in runs)
    cpu = sum(r["server_cpu_s"] for r in runs)
    return {
        "requests": requests,
        "seconds": round(seconds, 3),
        "requests_per_s": round(requests / seconds, 1),
        "server_cpu_s": round(cpu, 3),
        "requests_per_server_cpu_s": round(requests / cpu, 1) if cpu else None,
        "requests_per_s_runs": [r["requests_per_s"] for r in runs],
    }


def _serve(
    server: str, command: list[str], settings: KafkaSettings, port: int, first: int, sizes: dict[str, int]
) -> tuple[dict[str, Any], int]:
    """One server: /healthz, single-status callbacks, /healthz again (the baseline on both sides of the
    callbacks, so a change in the machine's load shows), batched callbacks when ``sizes["batched"]``.
    Returns the figures and the number of statuses published."""
    print(f" server {server}", flush=True)
    proc = _start_webhook(settings, port, command)
    base = f"http://127.0.0.1:{port}"
    hook = f"{base}/webhooks/whatsapp"
    batch = sizes["batch"]
    try:
        # Warm-up: connections, producer id, metadata of every partition.
        asyncio.run(_drive(hook, [_payload(first + i * batch, batch) for i in range(20)]))
        published = 20 * batch
        first += published
        before = _scenario("baseline", proc, f"{base}/healthz", [b""] * (sizes["baseline"] // 2), 0)
        single = _scenario(
            "single", proc, hook, [_payload(first + i, 1) for i in range(sizes["single"])], sizes["single"]
        )
        first += sizes["single"]
        published += sizes["single"]
        after = _scenario("baseline", proc, f"{base}/healthz", [b""] * (sizes["baseline"] // 2), 0)
        baseline = _pooled([before, after])
        result: dict[str, Any] = {
            "baseline_healthz": baseline,
            "single": single,
            "single_vs_baseline_request_ratio": round(single["requests_per_s"] / baseline["requests_per_s"], 3),
        }
        if count := sizes["batched"]:
            bodies = [_payload(first + i * batch, batch) for i in range(count)]
            result["batched"] = _scenario("batched", proc, hook, bodies, count * batch)
            published += count * batch
    finally:
        proc.terminate()
        proc.wait(30)
    return result, published


#: The servers measured side by side, the first one being what ``inturn webhook`` runs.
SERVERS = ("uvicorn_httptools", "uvicorn_h11", "granian")


def run(quick: bool) -> dict[str, Any]:
    """Every candidate server against the same fresh broker: bare /healthz, one and many statuses per callback."""
    sizes = {"batch": 100, "baseline": 2000 if quick else 8000, "single": 1000 if quick else 8000}
    servers: dict[str, Any] = {}
    published = 0
    with LocalKafka() as broker:
        settings = KafkaSettings(kafka_bootstrap=broker.bootstrap, topic_partitions=12)
        topics.create(make_admin(settings), settings)
        for i, server in enumerate(SERVERS):
            command = _server_command(server, port := free_port())
            if command is None:
                servers[server] = {"skipped": "not installed"}
                continue
            product = {**sizes, "batched": (60 if quick else 400) if i == 0 else 0}
            servers[server], count = _serve(server, command, settings, port, 10**7 * (i + 1), product)
            published += count
        on_topic = _acks_published(settings)
    if on_topic != published:
        raise RuntimeError(f"acks topic holds {on_topic} records, expected {published}")
    ours = servers[SERVERS[0]]
    return {
        "setup": {
            "concurrency": CONCURRENCY,
            "statuses_per_batched_request": sizes["batch"],
            "partitions": 12,
            "webhook_workers": 1,
            "server": SERVERS[0],
            "acks_verified_on_topic": on_topic,
            "note": "broker, webhook and load generator share this machine's CPUs",
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
            "cpus": len(os.sched_getaffinity(0)),
        },
        "baseline_healthz": ours["baseline_healthz"],
        "batched": ours["batched"],
        "single": ours["single"],
        "servers": {name: _summary(result) for name, result in servers.items()},
        "target_statuses_per_s": 5000,
        "batched_statuses_per_s_vs_target": round(ours["batched"]["statuses_per_s"] / 5000, 2),
        "single_vs_baseline_request_ratio": ours["single_vs_baseline_request_ratio"],
        "target_single_vs_baseline": 0.6,
        "target_single_per_s": 4000,
        "code": code_version(),
    }


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    """A server's figures side by side with the others' (rates and server CPU per request)."""
    if "skipped" in result:
        return result
    baseline, single = result["baseline_healthz"], result["single"]
    return {
        "healthz_requests_per_s": baseline["requests_per_s"],
        "healthz_server_cpu_us": round(baseline["server_cpu_s"] / baseline["requests"] * 1e6, 1),
        "single_callbacks_per_s": single["requests_per_s"],
        "single_server_cpu_us": round(single["server_cpu_s"] / single["requests"] * 1e6, 1),
        "single_vs_baseline_request_ratio": result["single_vs_baseline_request_ratio"],
    }
