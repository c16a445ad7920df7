"""Platform simulator throughput: messages/s and callbacks/s of one simulator process (one core).

The simulator runs as its own process (``inturn sim``, uvloop, rate limit off) and calls back a
receiver in this process; an aiohttp client here sends to 25k recipients over ``concurrency``
connections for ``duration`` seconds. The baseline is the same client against a server that does
nothing but answer 200 (the client's own ceiling on this box): ``ratio_to_client_ceiling`` near 1
means the simulator is not what limits a benchmark that uses it. ``msgs_per_sim_cpu_s`` divides by
the CPU time the simulator process actually used, which is the per-core figure on a shared machine;
``baseline_null_server_msgs_per_cpu_s`` is the same for the do-nothing server (aiohttp's own cost).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from inturn.schemas import encode_callback_data
from inturn_devtools.process import free_port
from inturn_devtools.waiting import eventually

RECIPIENTS = 25_000
NUMBERS = 10  # phone_number_ids the sends are spread over
TOKEN = "bench-token"  # noqa: S105 - a throwaway local simulator's token
SECRET = "bench-secret"  # noqa: S105 - likewise


def run(quick: bool) -> dict[str, Any]:
    """Measure the simulator and the client ceiling; returns the figures."""
    try:
        import uvloop
    except ImportError:  # optional (not on Windows)
        return asyncio.run(_measure(quick))
    return uvloop.run(_measure(quick))


async def _measure(quick: bool) -> dict[str, Any]:
    duration = 3.0 if quick else 10.0
    concurrency = 64
    statuses = 0

    async def hook(request: web.Request) -> web.Response:
        nonlocal statuses
        body = orjson.loads(await request.read())
        statuses += sum(len(c["value"]["statuses"]) for e in body["entry"] for c in e["changes"])
        return web.Response(text="ok")

    receiver = web.Application()
    receiver.router.add_post("/webhooks/whatsapp", hook)
    runner = web.AppRunner(receiver, access_log=None)
    await runner.setup()
    hook_port = free_port()
    await web.TCPSite(runner, "127.0.0.1", hook_port).start()
    try:
        port = free_port()
        sim = _start_sim(port, f"http://127.0.0.1:{hook_port}/webhooks/whatsapp")
        try:
            await _wait_ready(f"http://127.0.0.1:{port}/readyz")
            cpu_before = _cpu_seconds(sim.pid)
            statuses_before = statuses
            sent, errors, elapsed = await _drive(f"http://127.0.0.1:{port}", duration, concurrency)
            cpu_used = _cpu_seconds(sim.pid) - cpu_before
            callbacks_in_window = statuses - statuses_before
            drained = await _drain(lambda: statuses >= 2 * sent, 15.0)
            stats = await _get_json(f"http://127.0.0.1:{port}/_sim/stats")
        finally:
            _stop(sim)
        null_port = free_port()
        null = _start_null(null_port)
        try:
            await _wait_ready(f"http://127.0.0.1:{null_port}/readyz")
            null_cpu_before = _cpu_seconds(null.pid)
            base_sent, _, base_elapsed = await _drive(f"http://127.0.0.1:{null_port}", duration, concurrency)
            null_cpu = _cpu_seconds(null.pid) - null_cpu_before
        finally:
            _stop(null)
    finally:
        await runner.cleanup()
    sim_rate = sent / elapsed
    base_rate = base_sent / base_elapsed
    return {
        "recipients": RECIPIENTS,
        "phone_number_ids": NUMBERS,
        "concurrency": concurrency,
        "duration_s": round(elapsed, 2),
        "messages_accepted": sent,
        "send_errors": errors,
        "msgs_per_s": round(sim_rate),
        "callbacks_per_s": round(callbacks_in_window / elapsed),
        "sim_cpu_s": round(cpu_used, 2),
        "msgs_per_sim_cpu_s": round(sent / cpu_used) if cpu_used else None,
        "all_callbacks_arrived": drained,
        "callback_requests": stats["callback_requests"],
        "statuses_per_callback_request": round(stats["callbacks_sent"] / max(stats["callback_requests"], 1), 1),
        "baseline_client_ceiling_msgs_per_s": round(base_rate),
        "ratio_to_client_ceiling": round(sim_rate / base_rate, 3),
        "baseline_null_server_msgs_per_cpu_s": round(base_sent / null_cpu) if null_cpu else None,
    }


def _start_sim(port: int, webhook_url: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "INTURN_SIM_PORT": str(port),
        "INTURN_SIM_WEBHOOK_URL": webhook_url,
        "INTURN_SIM_ACCESS_TOKEN": TOKEN,
        "INTURN_SIM_APP_SECRET": SECRET,
        "INTURN_SIM_RATE_LIMIT_PER_S": "0",  # 80/s per number would cap the run at 800/s
        "INTURN_LOG_LEVEL": "WARNING",
    }
    return subprocess.Popen([sys.executable, "-m", "inturn_cli.main", "sim"], env=env)


def _start_null(port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "benchmarks.bench_sim", "--null-server", str(port)])


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def _wait_ready(url: str, within: float = 20.0) -> None:
    async with aiohttp.ClientSession() as session:

        async def ready() -> bool:
            async with session.get(url) as answer:
                return answer.status == 200

        async def answered() -> bool:
            try:
                return await ready()
            except aiohttp.ClientConnectionError:
                return False  # not listening yet

        await eventually(answered, within, f"{url} ready")


async def _drain(condition: Callable[[], bool], within: float) -> bool:
    try:
        await eventually(condition, within, "every callback")
    except TimeoutError:
        return False
    return True


async def _get_json(url: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(url) as answer:
        return await answer.json()


async def _drive(base_url: str, duration: float, concurrency: int) -> tuple[int, int, float]:
    """Send as fast as ``concurrency`` connections allow for ``duration`` s; (accepted, errors, seconds)."""
    numbers = [f"1000000{n:02d}" for n in range(NUMBERS)]
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    counter = itertools.count()
    accepted = errors = 0
    stop_at = time.monotonic() + duration

    async def sender(session: aiohttp.ClientSession) -> None:
        nonlocal accepted, errors
        while time.monotonic() < stop_at:
            n = next(counter)
            to = f"49{n % RECIPIENTS:09d}"
            body = orjson.dumps(
                {
                    "messaging_product": "whatsapp",
                    "recipient_type": "individual",
                    "to": to,
                    "type": "text",
                    "text": {"body": "hello"},
                    "biz_opaque_callback_data": encode_callback_data(f"room-{n % RECIPIENTS}", f"m{n}"),
                }
            )
            url = f"{base_url}/v21.0/{numbers[n % NUMBERS]}/messages"
            async with session.post(url, data=body, headers=headers) as answer:
                await answer.read()
                if answer.status == 200:
                    accepted += 1
                else:
                    errors += 1

    started = time.monotonic()
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(sender(session) for _ in range(concurrency)))
    return accepted, errors, time.monotonic() - started


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _null_server(port: int) -> None:
    """The baseline: answers every send 200 with a fixed Cloud API body and does nothing else."""
    answer = orjson.dumps({"messaging_product": "whatsapp", "messages": [{"id": "wamid.NULL"}]})

    async def send(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=answer, content_type="application/json")

    async def ready(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/{version}/{phone_number_id}/messages", send)
    app.router.add_get("/readyz", ready)
    try:
        import uvloop
    except ImportError:  # optional
        loop = None
    else:
        loop = uvloop.new_event_loop()
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None, loop=loop)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--null-server":
        _null_server(int(sys.argv[2]))
    else:
        import json

        print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
