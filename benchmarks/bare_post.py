"""The baseline of the worker benchmark: a bare aiohttp client POSTing the worker's send body to the simulator.

Run as its own process; prints its own CPU time per request as JSON. Same body, same URL, same
connection limit and uvloop as the worker, and nothing else: no Kafka, no ordering, no bookkeeping.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time

import aiohttp
import orjson
import uvloop


async def run(
    url: str, token: str, requests: int, concurrency: int, recipients: int, payload_bytes: int
) -> dict[str, float]:
    connector = aiohttp.TCPConnector(limit=concurrency)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    filler = "x" * payload_bytes
    done = 0
    failures = 0

    async def one(i: int) -> None:
        nonlocal done, failures
        body = orjson.dumps(
            {
                "messaging_product": "whatsapp",
                "recipient_type": "individual",
                "to": f"49170{i % recipients:07d}",
                "type": "text",
                "text": {"body": f"bare-{i} {filler}"},
                "biz_opaque_callback_data": orjson.dumps({"r": f"bare-{i % recipients}", "m": f"bare#{i}"}).decode(),
            }
        )
        async with session.post(url, data=body, headers=headers) as resp:
            await resp.read()
            if resp.status != 200:
                failures += 1
        done += 1

    async with aiohttp.ClientSession(connector=connector) as session:
        queue = iter(range(requests))

        async def lane() -> None:
            for i in queue:
                await one(i)

        before = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "requests": done,
        "failures": failures,
        "cpu_s": cpu,
        "wall_s": wall,
        "cpu_us_per_request": cpu / done * 1e6,
    }


def main() -> None:
    url, token, requests, concurrency, recipients, payload = sys.argv[1:7]
    result = uvloop.run(run(url, token, int(requests), int(concurrency), int(recipients), int(payload)))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
