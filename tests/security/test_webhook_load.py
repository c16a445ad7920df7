"""The webhook under a stranger's load (issue: 400 unauthenticated 1 MB senders and 3,000 slow clients for 30 s),
with its default limits: RSS stays under 300 MiB and is given back within 60 s after, ``/healthz`` on the internal
port answers within 100 ms throughout, and signed callbacks keep being served (their rate printed against an
undisturbed run of the same client in the same test).

The attackers run in a process of their own (one asyncio loop, loopback only, every loop bounded by the run's
end): senders with a forged signature of the right form and senders with only a ``sha256=`` prefix, each sending
1 MB bodies back to back; clients that send half their headers and wait, and clients that send headers and 10
bytes of a 1,000-byte body and wait, each reconnecting when the server closes it. The ``/healthz`` probe runs in a
process of its own too, so that what it measures is the webhook's answer, not this process's threads.

Two sizes (``FULL``, ``SHORT``):

- the issue's (``FULL``: 200 + 200 senders, 1,500 + 1,500 slow clients, 30 s), with the issue's bounds, every one
  of them (every ``/healthz`` within 100 ms): about 100 s; opt-in,
  ``INTURN_LOAD_TESTS=1 pytest tests/security/test_webhook_load.py -s``;
- about a third of it for 15 s (``SHORT``: the slow clients just past the 10 s header timeout), in ``make test``:
  the same RSS bounds (peak, given back within 60 s), so it fails when the body budget or the memory given back
  breaks; of ``/healthz`` it asserts that every probe was answered and the median within 100 ms, since a shared
  CI machine's scheduling alone delays single probes past 100 ms (docs/security.md, "Measured").
  ``tests/webhook/test_webhook_internal_port.py`` proves, by order of events rather than timing, that the probes
  do not wait for the serving loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from inturn_devtools.waiting import wait_until
from inturn_webhook.signature import sign

from ..webhook.support import meta_payload, meta_status
from .conftest import WEBHOOK_APP_SECRET, RawConnection, ServiceProcess, raise_open_files, rss_bytes, status_of

pytestmark = pytest.mark.kafka

BODY = 1_000_000
RSS_LIMIT = 300 * 1024 * 1024
GIVEN_BACK_WITHIN_S = 60.0
#: RSS counts as given back when within this much of the RSS before the load. What stays: Python's small-object
#: arenas (1 MiB each) that a few objects made during the load keep alive, 5-20 MiB measured (docs/security.md).
GIVEN_BACK_MARGIN = 24 * 1024 * 1024
HEALTHZ_WITHIN_S = 0.100
PROBE_EVERY_S = 0.1
Start = Callable[..., tuple[ServiceProcess, int, int]]


@dataclass(frozen=True, slots=True)
class Load:
    seconds: float
    senders: int  # 1 MB senders with a forged signature of the right form, and as many with only a prefix
    slow: int  # clients with half-sent headers, and as many with a stalled body
    undisturbed_s: float  # the signed callbacks' reference run
    every_probe_bounded: bool  # every /healthz within HEALTHZ_WITHIN_S (else: every probe answered, the median)


FULL = Load(seconds=30.0, senders=200, slow=1500, undisturbed_s=8.0, every_probe_bounded=True)
SHORT = Load(seconds=15.0, senders=70, slow=500, undisturbed_s=4.0, every_probe_bounded=False)


def _head(headers: dict[str, str]) -> bytes:
    lines = ["POST /webhooks/whatsapp HTTP/1.1", "Host: hooks.example.com", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _sender(port: int, done: asyncio.Event, signature: str, counts: Counter[str]) -> None:
    """Send 1 MB bodies under ``signature`` back to back until the attack is over (``done``); count the answers."""
    head = _head({"X-Hub-Signature-256": signature, "Content-Length": str(BODY), "Content-Type": "application/json"})
    await _again(port, done, head + b"x" * BODY, "sender", 0.05, counts)


async def _slow(port: int, done: asyncio.Event, opening: bytes, start_in: float, counts: Counter[str]) -> None:
    """Send ``opening`` and nothing more until the server closes; again, until the attack is over."""
    await asyncio.sleep(start_in)
    await _again(port, done, opening, "slow", 0.2, counts)


async def _again(port: int, done: asyncio.Event, data: bytes, kind: str, pause_s: float, counts: Counter[str]) -> None:
    """Connect, send ``data`` and count the answer as ``<kind>_<status>`` (``<kind>_closed`` when the connection
    fails or closes first, then wait ``pause_s``), over and over until the attack is over (``done``)."""
    while not done.is_set():
        writer = None
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(data)
            answer = await _until(reader.read(256), done)
            counts[f"{kind}_{status_of(answer)}"] += 1
        except (OSError, TimeoutError):
            counts[f"{kind}_closed"] += 1
            await asyncio.sleep(pause_s)
        finally:
            if writer is not None:
                writer.close()


async def _until(read: Any, done: asyncio.Event) -> bytes:
    """What ``read`` returns, or nothing once the attack is over (``done``)."""
    reading, ending = asyncio.ensure_future(read), asyncio.ensure_future(done.wait())
    await asyncio.wait([reading, ending], return_when=asyncio.FIRST_COMPLETED)
    ending.cancel()
    if reading.done():
        result: bytes = reading.result()
        return result
    reading.cancel()
    return b""


async def _attack(port: int, load: Load) -> Counter[str]:
    counts: Counter[str] = Counter()
    done = asyncio.Event()
    asyncio.get_running_loop().call_later(load.seconds, done.set)
    forged = "sha256=" + "ab" * 32
    half = b"POST /webhooks/whatsapp HTTP/1.1\r\nHost: x\r\nX-Hub-Signa"
    stalled = _head({"X-Hub-Signature-256": forged, "Content-Length": "1000"}) + b'{"object":'
    tasks = [
        *(_sender(port, done, forged, counts) for _ in range(load.senders)),
        *(_sender(port, done, "sha256=", counts) for _ in range(load.senders)),
        *(_slow(port, done, half, i / load.slow * 3, counts) for i in range(load.slow)),
        *(_slow(port, done, stalled, i / load.slow * 3, counts) for i in range(load.slow)),
    ]
    await asyncio.gather(*tasks)
    return counts


def attack(port: int, load: Load, results: Any) -> None:
    """The attackers' process (spawned): run them, put what they were answered on ``results``."""
    raise_open_files(16384)
    results.put(dict(asyncio.run(_attack(port, load))))


def probe(internal: int, stop: Any, results: Any) -> None:
    """The probe's process (spawned): ``GET /healthz`` then ``GET /readyz`` on the internal port every
    ``PROBE_EVERY_S`` over one connection until ``stop`` is set; puts each /healthz latency, /readyz's statuses
    and any error on ``results``."""
    latencies: list[float] = []
    ready: Counter[int] = Counter()
    errors: list[str] = []
    connection = RawConnection(internal)
    try:
        while not stop.wait(PROBE_EVERY_S):
            started = time.perf_counter()
            try:
                connection.send(b"GET /healthz HTTP/1.1\r\nHost: internal\r\n\r\n")
                answer = connection.read_response(5)
                latency = time.perf_counter() - started
                connection.send(b"GET /readyz HTTP/1.1\r\nHost: internal\r\n\r\n")
                ready[status_of(connection.read_response(5))] += 1
            except OSError as exc:
                errors.append(repr(exc))
                connection.close()
                connection = RawConnection(internal)
                continue
            latencies.append(latency)
            if status_of(answer) != 200:
                errors.append(answer[:60].decode(errors="replace"))
    finally:
        connection.close()
        results.put((latencies, dict(ready), errors))


class SignedClient(threading.Thread):
    """Posts signed single-status callbacks back to back over one keep-alive connection; counts the 200s."""

    def __init__(self, port: int, name: str) -> None:
        super().__init__(daemon=True)
        self.port, self.tag = port, name
        self.ok = 0
        self.failed = 0
        self.stop = threading.Event()

    def run(self) -> None:
        n = 0
        with httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10) as client:
            while not self.stop.is_set():
                n += 1
                status = meta_status(f"wamid.{self.tag}.{n}", "delivered", room=f"room-{n % 50}", message=f"m-{n}")
                body = orjson.dumps(meta_payload(status))
                try:
                    answer = client.post(
                        "/webhooks/whatsapp",
                        content=body,
                        headers={"X-Hub-Signature-256": sign(body, WEBHOOK_APP_SECRET.encode())},
                    )
                except httpx.TransportError:
                    self.failed += 1
                    continue
                if answer.status_code == 200:
                    self.ok += 1
                else:
                    self.failed += 1


def _signed_rate(port: int, seconds: float, tag: str, clients: int = 2) -> tuple[float, int]:
    runners = [SignedClient(port, f"{tag}{i}") for i in range(clients)]
    for runner in runners:
        runner.start()
    time.sleep(seconds)  # the measuring window itself (the clients run meanwhile), not a wait for a condition
    for runner in runners:
        runner.stop.set()
    for runner in runners:
        runner.join(15)
    return sum(r.ok for r in runners) / seconds, sum(r.failed for r in runners)


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.samples: list[int] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.25):
            with contextlib.suppress(OSError):
                self.samples.append(rss_bytes(self.pid))


def _hold(webhook_process: Start, load: Load) -> None:
    raise_open_files(16384)  # the webhook inherits it: the attackers' connections and its own
    started = time.monotonic()
    service, port, internal = webhook_process()
    _signed_rate(port, 2.0, "warm")  # connections, producer and caches warm before anything is measured
    undisturbed, undisturbed_failed = _signed_rate(port, load.undisturbed_s, "calm")
    before = rss_bytes(service.pid)

    spawn = multiprocessing.get_context("spawn")
    results, probed, stop_probe = spawn.Queue(), spawn.Queue(), spawn.Event()
    attackers = spawn.Process(target=attack, args=(port, load, results))
    prober = spawn.Process(target=probe, args=(internal, stop_probe, probed))
    rss = RssSampler(service.pid)
    prober.start()
    rss.start()
    attackers.start()
    try:
        time.sleep(3.0)  # the slow clients connect over their first 3 s; then the window measured
        under_load, load_failed = _signed_rate(port, load.seconds - 4.0, "load")
        counts = results.get(timeout=load.seconds + 60)
        attackers.join(30)
    finally:
        stop_probe.set()
        if attackers.is_alive():
            attackers.kill()
    latencies, ready, errors = probed.get(timeout=30)
    prober.join(10)
    ended = time.monotonic()
    given_back_at: list[float] = []

    def given_back() -> bool:
        if rss_bytes(service.pid) <= before + GIVEN_BACK_MARGIN:
            given_back_at.append(time.monotonic() - ended)
        return bool(given_back_at)

    with contextlib.suppress(TimeoutError):  # asserted below, with the figures printed first
        wait_until(given_back, GIVEN_BACK_WITHIN_S, "RSS given back", every=0.25)
    given_back_after = given_back_at[0] if given_back_at else None
    rss.stop.set()
    rss.join(5)
    after = rss_bytes(service.pid)

    peak = max(rss.samples)
    latencies.sort()
    print(
        f"\nwebhook under load ({load.seconds:.0f} s, {2 * load.senders} senders, {2 * load.slow} slow clients; "
        f"load average {os.getloadavg()[0]:.1f}): RSS before {before / 2**20:.0f} MiB, peak {peak / 2**20:.0f} MiB, "
        f"after {after / 2**20:.0f} MiB, back within {GIVEN_BACK_MARGIN / 2**20:.0f} MiB of before after "
        f"{given_back_after if given_back_after is None else round(given_back_after, 1)} s; "
        f"/healthz: {len(latencies)} probes, median {statistics.median(latencies) * 1000:.1f} ms, "
        f"p99 {latencies[int(len(latencies) * 0.99)] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms, "
        f"over {HEALTHZ_WITHIN_S * 1000:.0f} ms: {sum(1 for x in latencies if x > HEALTHZ_WITHIN_S)}; "
        f"/readyz: {ready}; signed callbacks: {under_load:.0f}/s under load against {undisturbed:.0f}/s "
        f"undisturbed ({under_load / undisturbed:.0%}), failed {load_failed} (undisturbed {undisturbed_failed}); "
        f"attackers answered: {counts}; test {time.monotonic() - started:.0f} s"
    )
    assert peak < RSS_LIMIT, peak
    assert given_back_after is not None, (before, after)
    assert not errors, errors[:3]
    # Probed throughout: every 100 ms, at least half as often on a busy machine.
    assert len(latencies) >= load.seconds / PROBE_EVERY_S / 2, len(latencies)
    if load.every_probe_bounded:
        assert latencies[-1] <= HEALTHZ_WITHIN_S, latencies[-5:]
    else:
        assert statistics.median(latencies) <= HEALTHZ_WITHIN_S, statistics.median(latencies)
    assert under_load > 0
    assert counts.get("sender_401", 0) > 0  # the attack ran: forged and prefix-only bodies refused
    assert counts.get("slow_408", 0) > 0  # half-sent headers timed out
    assert service.proc.poll() is None


@pytest.mark.skipif(not os.environ.get("INTURN_LOAD_TESTS"), reason="the 30-second load run: INTURN_LOAD_TESTS=1")
def test_the_webhook_holds_400_unauthenticated_1_mb_senders_and_3000_slow_clients(webhook_process: Start) -> None:
    # About 100 s on a quiet 2-core machine, past the minute `make test` affords: run when asked,
    # INTURN_LOAD_TESTS=1 pytest tests/security/test_webhook_load.py -s
    _hold(webhook_process, FULL)


def test_the_webhook_holds_a_third_of_that_load_for_15_s(webhook_process: Start) -> None:
    _hold(webhook_process, SHORT)
