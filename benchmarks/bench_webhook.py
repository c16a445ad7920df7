"""Webhook throughput: statuses/s of one webhook process, Kafka publish and confirmation included.

Starts its own Kafka broker (``LocalKafka``) and one ``inturn webhook`` process (uvicorn, one
worker), then drives it over real HTTP from this process with aiohttp:

- ``baseline``: ``GET /healthz``, the same server's bare HTTP round trip (no work);
- ``batched``: signed Meta callbacks carrying many statuses each (as Meta batches them);
- ``single``: one status per callback.

Every request is answered 200 only after Kafka confirmed its acks, and the acks topic is counted
afterwards to prove every status was published once. Figures: wall-clock rates, and statuses per
CPU-second of the webhook process (the machine is shared by broker, client and server, so the
CPU-second figure is the fairer "per process" number).
"""

from __future__ import annotations

import asyncio
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
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


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


def _start_webhook(settings: KafkaSettings, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "INTURN_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "INTURN_WEBHOOK_APP_SECRETS": SECRET,
        "INTURN_WEBHOOK_HOST": "127.0.0.1",
        "INTURN_WEBHOOK_PORT": str(port),
        "INTURN_LOG_LEVEL": "WARNING",
        "INTURN_LOG_FORMAT": "json",
    }
    proc = subprocess.Popen([sys.executable, "-m", "inturn_cli.main", "webhook"], env=env)
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


def run(quick: bool) -> dict[str, Any]:
    """Run the three scenarios against a fresh broker and webhook process."""
    batch = 100
    batched_requests = 60 if quick else 400
    single_requests = 500 if quick else 4000
    baseline_requests = 1000 if quick else 6000
    with LocalKafka() as broker:
        settings = KafkaSettings(kafka_bootstrap=broker.bootstrap, topic_partitions=12)
        topics.create(make_admin(settings), settings)
        port = free_port()
        proc = _start_webhook(settings, port)
        try:
            base = f"http://127.0.0.1:{port}"
            # Warm-up: connections, producer id, metadata of every partition.
            asyncio.run(_drive(f"{base}/webhooks/whatsapp", [_payload(10**9 + i * batch, batch) for i in range(20)]))
            warm = 20 * batch
            baseline = _scenario("baseline", proc, f"{base}/healthz", [b""] * baseline_requests, 0)
            bodies = [_payload(i * batch, batch) for i in range(batched_requests)]
            batched = _scenario("batched", proc, f"{base}/webhooks/whatsapp", bodies, batched_requests * batch)
            first = batched_requests * batch
            bodies = [_payload(first + i, 1) for i in range(single_requests)]
            single = _scenario("single", proc, f"{base}/webhooks/whatsapp", bodies, single_requests)
            published = _acks_published(settings)
        finally:
            proc.terminate()
            proc.wait(30)
    expected = warm + batched_requests * batch + single_requests
    if published != expected:
        raise RuntimeError(f"acks topic holds {published} records, expected {expected}")
    return {
        "setup": {
            "concurrency": CONCURRENCY,
            "statuses_per_batched_request": batch,
            "partitions": 12,
            "webhook_workers": 1,
            "acks_verified_on_topic": published,
            "note": "broker, webhook and load generator share this machine's CPUs",
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
            "cpus": len(os.sched_getaffinity(0)),
        },
        "baseline_healthz": baseline,
        "batched": batched,
        "single": single,
        "target_statuses_per_s": 5000,
        "batched_statuses_per_s_vs_target": round(batched["statuses_per_s"] / 5000, 2),
        "single_vs_baseline_request_ratio": round(single["requests_per_s"] / baseline["requests_per_s"], 3),
    }
