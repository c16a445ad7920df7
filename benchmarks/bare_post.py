"""The baselines of the worker benchmark and the candidates of the transport benchmark: a bare HTTP client POSTing
the worker's send body to the simulator, and nothing else (no Kafka, no ordering, no bookkeeping).

``python -m benchmarks.bare_post URL TOKEN REQUESTS POOL RECIPIENTS PAYLOAD [--client NAME] [--senders N]``,
run as its own process; prints its own CPU time (getrusage of the whole process: every thread, user + system)
per request as JSON. ``senders`` coroutines share ``REQUESTS`` sends and one client whose pool holds ``POOL``
connections, so with more senders than connections the rest wait for a pooled connection, as the worker's rooms
do. Same body, URL, headers and uvloop for every client:

- ``aiohttp``: an ``aiohttp.ClientSession`` behind the FIFO gate the adapters had in front of it (aiohttp's own
  wait for a connection scans its whole queue on every release);
- ``inturn``: ``inturn.platforms.transport.HttpTransport``, the adapters' transport;
- ``pyreqwest``: pyreqwest's async client (Rust reqwest/hyper on a tokio runtime), ``max_connections`` = pool;
- ``aiosonic``: aiosonic's ``HTTPClient`` with a connection pool of ``POOL``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import orjson
import uvloop

Post = Callable[[bytes], Awaitable[int]]  # body -> HTTP status
CLIENTS = ("aiohttp", "inturn", "pyreqwest", "aiosonic")


async def _client(name: str, url: str, headers: dict[str, str], pool: int, stack: AsyncExitStack) -> Post:
    """A POST of a body to ``url`` through client ``name``; its resources closed with ``stack``."""
    if name == "aiohttp":
        import aiohttp

        from benchmarks.slots import Slots

        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=pool))
        stack.push_async_callback(session.close)
        gate = Slots(pool)

        async def post_aiohttp(body: bytes) -> int:
            async with gate, session.post(url, data=body, headers=headers) as resp:
                await resp.read()
                return resp.status

        return post_aiohttp
    if name == "inturn":
        from inturn.platforms.transport import HttpTransport

        transport = HttpTransport(pool, 30.0)
        stack.push_async_callback(transport.close)

        async def post_inturn(body: bytes) -> int:
            return (await transport.request(url, headers, body)).status

        return post_inturn
    if name == "pyreqwest":
        from pyreqwest.client import ClientBuilder

        client = ClientBuilder().max_connections(pool).http1_only().build()
        stack.push_async_callback(client.close)

        async def post_pyreqwest(body: bytes) -> int:
            resp = await client.post(url).headers(headers).body_bytes(body).build().send()
            await resp.bytes()
            return resp.status

        return post_pyreqwest
    if name == "aiosonic":
        import aiosonic
        from aiosonic.connectors import TCPConnector
        from aiosonic.pools import PoolConfig

        sonic = aiosonic.HTTPClient(connector=TCPConnector(pool_configs={":default": PoolConfig(size=pool)}))
        stack.push_async_callback(sonic.aclose)

        async def post_aiosonic(body: bytes) -> int:
            resp = await sonic.post(url, data=body, headers=headers)
            await resp.content()
            return int(resp.status_code)

        return post_aiosonic
    raise ValueError(f"unknown client {name!r}: one of {', '.join(CLIENTS)}")


async def run(
    url: str,
    token: str,
    requests: int,
    pool: int,
    recipients: int,
    payload_bytes: int,
    client: str = "aiohttp",
    senders: int | None = None,
) -> dict[str, Any]:
    """Send ``requests`` POSTs from ``senders`` coroutines (default: ``pool``); the client's CPU per request."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    filler = "x" * payload_bytes
    done = 0
    failures = 0
    async with AsyncExitStack() as stack:
        post = await _client(client, url, headers, pool, stack)

        async def one(i: int) -> None:
            nonlocal done, failures
            body = orjson.dumps(
                {
                    "messaging_product": "whatsapp",
                    "recipient_type": "individual",
                    "to": f"49170{i % recipients:07d}",
                    "type": "text",
                    "text": {"body": f"bare-{i} {filler}"},
                    "biz_opaque_callback_data": orjson.dumps(
                        {"r": f"bare-{i % recipients}", "m": f"bare#{i}"}
                    ).decode(),
                }
            )
            if await post(body) != 200:
                failures += 1
            done += 1

        queue = iter(range(requests))

        async def lane() -> None:
            for i in queue:
                await one(i)

        cpu0, t0 = time.process_time(), time.perf_counter()  # process_time: user + system CPU of all threads
        await asyncio.gather(*(lane() for _ in range(senders or pool)))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    return {
        "client": client,
        "requests": done,
        "failures": failures,
        "pool": pool,
        "senders": senders or pool,
        "cpu_s": cpu,
        "wall_s": wall,
        "requests_per_s": done / wall,
        "cpu_us_per_request": cpu / done * 1e6,
    }


def main() -> None:
    """Parse the command line, run, print the figures as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bare_post", description=__doc__)
    parser.add_argument("url")
    parser.add_argument("token")
    parser.add_argument("requests", type=int)
    parser.add_argument("pool", type=int, help="connections at most")
    parser.add_argument("recipients", type=int)
    parser.add_argument("payload_bytes", type=int)
    parser.add_argument("--client", choices=CLIENTS, default="aiohttp")
    parser.add_argument("--senders", type=int, default=None, help="concurrent senders (default: the pool size)")
    a = parser.parse_args()
    result = uvloop.run(run(a.url, a.token, a.requests, a.pool, a.recipients, a.payload_bytes, a.client, a.senders))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
