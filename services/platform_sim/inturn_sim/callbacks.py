"""Status callbacks to the webhook: batched, signed, retried with backoff, held back on demand.

A fixed set of sender coroutines drains one outbox: each takes up to ``batch_max`` due statuses,
POSTs them as one Meta ``messages`` webhook and, once the webhook answered 2xx (or the status was
given up after the last retry), hands the batch back through ``on_done`` so the message's next
status can be scheduled. That chain is what keeps sent -> delivered -> read in order per message.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Callable, Iterable
from urllib.parse import urlencode

import aiohttp
import structlog
from yarl import URL

from inturn.schemas import now_ms
from inturn.settings.sim import SimSettings
from inturn_sim import meta, platforms
from inturn_sim.knobs import Knobs, Latency
from inturn_sim.records import Stats, Status

log = structlog.get_logger("inturn_sim.callbacks")


class CallbackSender:
    """Sends due statuses to ``knobs.webhook_url`` with one ``aiohttp.ClientSession``."""

    def __init__(
        self,
        settings: SimSettings,
        knobs: Knobs,
        stats: Stats,
        generation: Callable[[], int],
        on_done: Callable[[list[Status]], None],
        rng: random.Random | None = None,
    ) -> None:
        self._settings = settings  # secrets, account, batch size, concurrency and timeout: fixed for its life
        self._knobs = knobs
        self._stats = stats
        self._generation = generation
        self._on_done = on_done
        self._secret = settings.sim_app_secret.get_secret_value().encode()
        self._twilio_token = settings.sim_twilio_auth_token.get_secret_value().encode()
        self._outbox: deque[Status] = deque()
        self._retries: deque[tuple[list[Status], int]] = deque()
        self._held: dict[str, list[Status]] = {}
        self._wake = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._rng = rng or random.Random()  # noqa: S311 - a simulation's draws, not cryptography
        self._delay: tuple[tuple[float, float, float], Latency] | None = None  # the knobs it was made of, and it
        self._again: set[asyncio.Task[None]] = set()  # duplicated requests on their way

    async def start(self) -> None:
        """Open the client session and start the sender coroutines."""
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self._settings.sim_callback_timeout_s),
            connector=aiohttp.TCPConnector(limit=self._settings.sim_callback_concurrency),
        )
        lanes = range(self._settings.sim_callback_concurrency)
        self._tasks = [asyncio.create_task(self._work(), name=f"sim-callbacks-{i}") for i in lanes]
        for task in self._tasks:
            task.add_done_callback(_report_death)

    async def close(self) -> None:
        """Stop sending (what is still due is not sent) and close the session."""
        for task in (*self._tasks, *self._again):
            task.cancel()
        await asyncio.gather(*self._tasks, *self._again, return_exceptions=True)
        self._tasks = []
        self._again.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def started(self) -> bool:
        """Whether the sender coroutines run."""
        return bool(self._tasks)

    def enqueue(self, status: Status) -> None:
        """Queue a due status, or hold it back when its recipient is withheld."""
        if not self._url_of(status):
            self._stats.callbacks_unsent += 1
            return
        recipient = status.sent.to
        if recipient in self._knobs.withhold_recipients:
            self._held.setdefault(recipient, []).append(status)
            self._stats.withheld += 1
            return
        if self._knobs.callback_delay_median_ms > 0:  # the platform is late with it: another status may overtake
            self._stats.callbacks_delayed += 1
            asyncio.get_running_loop().call_later(self._delay_draw(), self._due_late, status)
            return
        self._outbox.append(status)
        self._wake.set()

    def _delay_draw(self) -> float:
        knobs = self._knobs
        shape = (
            knobs.callback_delay_median_ms,
            max(knobs.callback_delay_p99_ms, knobs.callback_delay_median_ms),
            knobs.callback_delay_max_ms,
        )
        if self._delay is None or self._delay[0] != shape:
            self._delay = (shape, Latency(self._rng, *shape))
        return self._delay[1].draw()

    def _due_late(self, status: Status) -> None:
        if status.sent.generation == self._generation():
            self._outbox.append(status)
            self._wake.set()

    def release(self, recipients: Iterable[str]) -> int:
        """Queue every held status of ``recipients`` in the order it became due; returns how many."""
        released = 0
        for recipient in recipients:
            for status in self._held.pop(recipient, ()):
                self._outbox.append(status)
                released += 1
        self._stats.withheld -= released
        if released:
            self._wake.set()
        return released

    def held_recipients(self) -> list[str]:
        """Recipients with statuses held back right now."""
        return list(self._held)

    def clear(self) -> None:
        """Forget every due, retried and held status (``POST /_sim/reset``)."""
        self._outbox.clear()
        self._retries.clear()
        self._held.clear()
        self._stats.withheld = 0

    async def _work(self) -> None:
        while True:
            if self._retries:
                batch, attempt = self._retries.popleft()
            elif self._outbox:
                batch, attempt = self._take_batch(), 0
            else:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._post(batch, attempt)

    def _url_of(self, status: Status) -> str:
        """Where ``status`` is called back: the platform's webhook URL knob, or a Twilio send's StatusCallback."""
        platform = status.sent.platform
        if platform == "twilio":
            return status.sent.callback_url or ""
        if platform == "messenger":
            return self._knobs.messenger_webhook_url
        if platform == "instagram":
            return self._knobs.instagram_webhook_url
        return self._knobs.webhook_url

    def _take_batch(self) -> list[Status]:
        """The next statuses for one request: up to ``batch_max`` of one platform in a row (Meta batches events);
        Twilio calls back one status per request."""
        outbox, most = self._outbox, self._settings.sim_callback_batch_max
        first = outbox.popleft()
        batch = [first]
        if first.sent.platform == "twilio":
            return batch
        while outbox and len(batch) < most and outbox[0].sent.platform == first.sent.platform:
            batch.append(outbox.popleft())
        return batch

    def _render(self, batch: list[Status]) -> tuple[str, bytes, dict[str, str]]:
        """URL, body and headers of the request calling ``batch`` back, in its platform's wire format."""
        platform = batch[0].sent.platform
        if platform == "twilio":
            status = batch[0]
            sent, url = status.sent, self._url_of(status)
            params = platforms.twilio_status_form(
                sent.wamid, status.status, sent.phone_number_id, sent.sender or "", sent.to
            )
            signature = platforms.twilio_signed(self._twilio_token, url, params)
            headers = {"Content-Type": "application/x-www-form-urlencoded", "X-Twilio-Signature": signature}
            return url, urlencode(params).encode(), headers
        if platform in ("messenger", "instagram"):
            events = [
                (
                    s.sent.phone_number_id,
                    platforms.delivery_event(s.sent.to, s.sent.phone_number_id, s.covers, s.ts_ms)
                    if platform == "messenger"
                    else platforms.seen_event(s.sent.to, s.sent.phone_number_id, s.sent.wamid, s.ts_ms),
                )
                for s in batch
            ]
            body = platforms.messaging_payload("page" if platform == "messenger" else "instagram", events, now_ms())
        else:
            body = self._whatsapp_body(batch)
        headers = {"Content-Type": "application/json", "X-Hub-Signature-256": meta.signature(body, self._secret)}
        return self._url_of(batch[0]), body, headers

    def _whatsapp_body(self, batch: list[Status]) -> bytes:
        precision = self._knobs.timestamp_precision
        return meta.status_payload(
            self._settings.sim_waba_id,
            self._settings.sim_display_phone_number,
            (
                (
                    s.sent.phone_number_id,
                    meta.status_object(
                        s.sent.wamid,
                        s.status,
                        meta.format_timestamp(s.ts_ms, precision),
                        s.sent.to,
                        s.sent.callback_data,
                        failed=s.status == "failed",
                    ),
                )
                for s in batch
            ),
        )

    async def _post(self, batch: list[Status], attempt: int) -> None:
        assert self._session is not None
        url, body, headers = self._render(batch)
        answer: int | str
        try:
            # encoded=True: the request target is the URL exactly as given (Twilio signs the StatusCallback as is;
            # yarl would otherwise re-quote its query).
            async with self._session.post(URL(url, encoded=True), data=body, headers=headers) as response:
                await response.read()
                answer = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            # The webhook being down or slow is a condition the simulator models (Meta retries), not a bug here.
            answer = type(exc).__name__
        if isinstance(answer, int) and 200 <= answer < 300:
            self._stats.callback_requests += 1
            self._stats.callbacks_sent += len(batch)
            by_status = self._stats.callbacks_by_status
            for s in batch:
                by_status[s.status] = by_status.get(s.status, 0) + 1
            self._on_done(batch)
            rate = self._knobs.callback_duplicate_rate
            if rate > 0 and self._rng.random() < rate:  # the platform delivers this request once more, later
                self._stats.callbacks_duplicated += len(batch)
                delay = self._rng.uniform(0, self._knobs.callback_duplicate_delay_ms / 1000)
                task = asyncio.create_task(self._post_again(url, body, headers, delay), name="sim-callback-again")
                self._again.add(task)
                task.add_done_callback(self._again.discard)
            return
        if attempt < self._knobs.callback_retries:
            self._stats.callback_retries += 1
            delay = self._knobs.callback_backoff_ms / 1000 * 2**attempt
            asyncio.get_running_loop().call_later(delay, self._retry, batch, attempt + 1)
            return
        log.warning("callback_given_up", answer=answer, statuses=len(batch), attempts=attempt + 1)
        self._stats.callbacks_failed += len(batch)
        self._on_done(batch)

    async def _post_again(self, url: str, body: bytes, headers: dict[str, str], delay: float) -> None:
        """A duplicate of an answered callback request: sent once, its answer ignored (the webhook must cope)."""
        await asyncio.sleep(delay)  # the modelled duplicate's delay itself, not a wait for a condition
        assert self._session is not None
        try:
            async with self._session.post(URL(url, encoded=True), data=body, headers=headers) as response:
                await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.info("callback_duplicate_unanswered", error=type(exc).__name__)

    def _retry(self, batch: list[Status], attempt: int) -> None:
        current = self._generation()
        batch = [s for s in batch if s.sent.generation == current]
        if batch:
            self._retries.append((batch, attempt))
            self._wake.set()


def _report_death(task: asyncio.Task[None]) -> None:
    # A sender coroutine only ends by cancellation; anything else is a bug that must not pass silently.
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("callback_sender_died", task=task.get_name(), exc_info=exc)
