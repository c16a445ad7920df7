"""The Kafka clients of the package index side by side: client CPU per record to produce (idempotent, acks=all, the
worker's linger for events) and to consume back, each client in its own process on the same broker in the same run.

The worker's floor (``benchmarks/floor_worker.py``) is built on confluent-kafka; this shows it is the cheapest client
measured, so what the floor costs beyond the bare POST is not the price of one library's choice. Candidates:
confluent-kafka (librdkafka, C) and aiokafka (the protocol in Python, asyncio). CPU is getrusage of the client's
process (every thread). Rounds alternate the order.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

from benchmarks import code_version, fresh_topics
from inturn_devtools import LocalKafka

CLIENTS = ("confluent-kafka", "aiokafka")

_SCRIPT = r"""
import asyncio, json, resource, sys, uuid
bootstrap, topic, n, client = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
value = b"x" * 300  # about an event's size

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

out = {"client": client, "records": n}
if client == "confluent-kafka":
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 50})
    p.produce(topic, b"warm-up")
    p.flush(30)
    c0 = cpu()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, key=str(i % 1000))
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    out["produce_us_per_record"] = (cpu() - c0) / n * 1e6
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "enable.auto.commit": False})
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, q, OFFSET_BEGINNING) for q in parts])
    got, c0 = 0, cpu()
    while got < n + 1:
        got += len(c.consume(num_messages=500, timeout=0.1))
    out["consume_us_per_record"] = (cpu() - c0) / (n + 1) * 1e6
    c.close()
else:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def main():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=50)
        await p.start()
        await (await p.send(topic, b"warm-up"))
        c0 = cpu()
        sent = []
        for i in range(n):
            sent.append(await p.send(topic, value, key=str(i % 1000).encode()))
            if len(sent) >= 5000:
                await asyncio.gather(*sent)
                sent = []
        await asyncio.gather(*sent)
        out["produce_us_per_record"] = (cpu() - c0) / n * 1e6
        await p.stop()
        c = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await c.start()
        got, c0 = 0, cpu()
        while got < n + 1:
            batch = await c.getmany(timeout_ms=100, max_records=500)
            got += sum(len(records) for records in batch.values())
        out["consume_us_per_record"] = (cpu() - c0) / (n + 1) * 1e6
        await c.stop()

    import uvloop
    uvloop.run(main())
print(json.dumps(out))
"""


def _client_run(bootstrap: str, client: str, records: int) -> dict[str, Any]:
    settings = fresh_topics(bootstrap, f"kc-{uuid.uuid4().hex[:6]}", 4)
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, bootstrap, settings.topic_messages, str(records), client],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


def run(quick: bool) -> dict[str, Any]:
    """Per client: CPU per record produced and consumed, over the rounds; each against confluent-kafka's."""
    records, rounds = (20_000, 1) if quick else (100_000, 3)
    runs: dict[str, list[dict[str, Any]]] = {client: [] for client in CLIENTS}
    with LocalKafka(heap_mb=768) as kafka:
        for i in range(rounds):
            for client in CLIENTS if i % 2 == 0 else CLIENTS[::-1]:
                runs[client].append(_client_run(kafka.bootstrap, client, records))
    clients = {}
    for client, measured in runs.items():
        clients[client] = {
            "produce_us_per_record": round(sum(r["produce_us_per_record"] for r in measured) / len(measured), 2),
            "consume_us_per_record": round(sum(r["consume_us_per_record"] for r in measured) / len(measured), 2),
            "runs": measured,
        }
    base = clients["confluent-kafka"]
    for figures in clients.values():
        figures["produce_vs_confluent"] = round(figures["produce_us_per_record"] / base["produce_us_per_record"], 2)
        figures["consume_vs_confluent"] = round(figures["consume_us_per_record"] / base["consume_us_per_record"], 2)
    return {"records": records, "rounds": rounds, "clients": clients, "code": code_version()}
