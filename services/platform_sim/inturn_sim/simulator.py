"""The platform's behaviour, free of HTTP: answer a send, deliver it to the device later, call back statuses.

Delivery model: an accepted send gets a latency drawn from a seeded lognormal; when it has passed
(one ``loop.call_at`` timer per send, no task per message) the message reaches the recipient's
device -- appended to the receipt log, whose order IS the device order -- and its ``sent`` status
becomes due, then ``delivered`` (and maybe ``read``) once the previous status was called back.
Sends to one recipient that overlap in time therefore overtake each other when their latencies
differ; a sender that waits for ``sent`` of N before sending N+1 never sees N+1 overtake N.
"""

from __future__ import annotations

import asyncio
import hmac
import math
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from inturn.schemas import decode_callback_data, now_ms
from inturn.settings.sim import SimSettings
from inturn_sim import meta
from inturn_sim.callbacks import CallbackSender
from inturn_sim.device import ReceiptLog
from inturn_sim.knobs import Knobs, KnobsUpdate, Latency
from inturn_sim.records import DELIVER, DROP, FAIL, Sent, Stats, Status

#: Message types of the Cloud API send call; the body must carry the object named by ``type``.
MESSAGE_TYPES = frozenset(
    [
        "text",
        "template",
        "image",
        "audio",
        "video",
        "document",
        "sticker",
        "location",
        "contacts",
        "interactive",
        "reaction",
    ]
)


@dataclass(slots=True)
class Fault:
    """A queued answer (``POST /_sim/faults``): the next ``remaining`` matching sends get ``status``, or, with
    ``until`` (monotonic seconds), every matching send until then (a storm or a burst)."""

    status: int
    remaining: int
    recipient: str | None = None
    retry_after: float | None = None
    account: str | None = None  # phone_number_id, page, IG account, Account SID or "bot"; None: any
    until: float | None = None


@dataclass(slots=True)
class Answer:
    """What the HTTP layer answers a send with, after waiting ``delay_s`` (slow responses)."""

    status: int
    body: bytes
    headers: dict[str, str] | None = None
    delay_s: float = 0.0


class Simulator:
    """One simulated platform: its knobs, counters, fault queue, receipt log and callback sender."""

    def __init__(self, settings: SimSettings) -> None:
        self.settings = settings
        self.knobs = Knobs.of(settings)
        self.stats = Stats()
        self.seed = settings.sim_seed
        self.rng = random.Random(self.seed)  # noqa: S311 - a seeded simulation, not cryptography
        self.latency = Latency(
            self.rng, self.knobs.latency_median_ms, self.knobs.latency_p99_ms, self.knobs.latency_max_ms
        )
        self.receipts = ReceiptLog(settings.sim_receipts_path, settings.sim_receipts_memory_max)
        self.faults: list[Fault] = []
        self.generation = 0  # bumped by reset(): timers and retries of older sends become no-ops
        on_done = self._status_called_back
        self.sender = CallbackSender(settings, self.knobs, self.stats, lambda: self.generation, on_done, self.rng)
        self._bearer = f"Bearer {settings.sim_access_token.get_secret_value()}"
        self._buckets: dict[str, list[float]] = {}  # phone_number_id -> [tokens, last refill (monotonic)]
        self._run_id = f"{time.time_ns() // 1_000_000:X}"  # keeps wamids unique across restarts
        self._next_id = 0
        self._telegram_ids: dict[str, int] = {}  # chat_id -> last message_id (Telegram numbers messages per chat)
        # Messenger watermarks, per (page, recipient): accepted_at of sends not yet at the device, and the sends that
        # reached it and wait for a delivery callback.
        self._in_flight: dict[tuple[str, str], list[int]] = {}
        self._undelivered: dict[tuple[str, str], list[Sent]] = {}
        self._flusher: asyncio.Task[None] | None = None
        self.closing = False

    # --- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the callback sender and the receipt-file flusher."""
        await self.sender.start()
        if self.settings.sim_receipts_path:
            self._flusher = asyncio.create_task(self._flush_periodically(), name="sim-receipts-flush")

    async def close(self) -> None:
        """Stop calling back, flush and close the receipt file."""
        self.closing = True
        if self._flusher is not None:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
        await self.sender.close()
        self.receipts.close()

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.settings.sim_receipts_flush_s)
            self.receipts.flush()

    # --- the send API --------------------------------------------------------------------------------

    def authorized(self, authorization: str | None) -> bool:
        """Whether the ``Authorization`` header carries the configured bearer token (constant-time compare)."""
        return authorization is not None and hmac.compare_digest(authorization.encode(), self._bearer.encode())

    def answer_send(self, phone_number_id: str, body: Any, via: str | None = None) -> Answer:
        """Validate, apply faults and the rate limit, and accept a send body (already JSON-decoded)."""
        problem = _invalid(body)
        if problem is not None:
            self.stats.reject(400)
            return Answer(400, meta.error_body(400, problem))
        to: str = body["to"]
        if self.faults and (fault := self._take_fault(phone_number_id, to)) is not None:
            return self._fault_answer(fault)
        knobs = self.knobs
        if knobs.rate_limit_per_s > 0 and (wait := self._take_token(phone_number_id)) is not None:
            self.stats.reject(429)
            return Answer(429, meta.error_body(429), {"Retry-After": str(max(1, math.ceil(wait)))})
        rng = self.rng
        if knobs.error_rate_5xx > 0 and rng.random() < knobs.error_rate_5xx:
            self.stats.reject(500)
            return Answer(500, meta.error_body(500))
        wamid = self._accept(phone_number_id, to, body.get("biz_opaque_callback_data"), via)
        delay = knobs.slow_ms / 1000 if knobs.slow_rate > 0 and rng.random() < knobs.slow_rate else 0.0
        if delay:
            self.stats.slow_answers += 1
        # A slow answer is slow after acceptance: callbacks may reach the webhook before the send returns.
        return Answer(200, meta.send_answer(to, wamid), delay_s=delay)

    def _draw(self, callback_data: str | None, *, can_fail: bool = True) -> tuple[int, bool, str | None, str | None]:
        """An accepted send's fate (delivered, failed unless ``can_fail`` is false, or dropped), whether it is read,
        and its room and message from inturn's routing data (None and None without it)."""
        knobs, rng = self.knobs, self.rng
        fate = DELIVER
        if can_fail and knobs.failed_rate > 0 and rng.random() < knobs.failed_rate:
            fate = FAIL
        elif knobs.drop_rate > 0 and rng.random() < knobs.drop_rate:
            fate = DROP
        read = knobs.read_rate > 0 and rng.random() < knobs.read_rate
        decoded = decode_callback_data(callback_data)
        if decoded is None:
            return fate, read, None, None
        return fate, read, decoded.room_id, decoded.message_id

    def _accept(self, phone_number_id: str, to: str, callback_data: str | None, via: str | None = None) -> str:
        self._next_id += 1
        wamid = f"wamid.SIM{self._run_id}{self._next_id:010X}"
        fate, read, room_id, message_id = self._draw(callback_data)
        sent = Sent(
            wamid, to, phone_number_id, callback_data, room_id, message_id, now_ms(), fate, read, self.generation,
            via=via,
        )  # fmt: skip
        self.stats.accepted += 1
        self.stats.pending += 1
        loop = asyncio.get_running_loop()
        loop.call_at(loop.time() + self.latency.draw(), self._arrive, sent)
        return wamid

    def gate(self, account: str, to: str) -> tuple[int, float | None] | None:
        """Queued faults, the rate limit per ``account`` and the 5xx rate, for the platforms other than WhatsApp: None
        when the send may be accepted, else the HTTP status to answer (counted) and its Retry-After seconds."""
        if self.faults and (fault := self._take_fault(account, to)) is not None:
            self.stats.reject(fault.status)
            after = (fault.retry_after if fault.retry_after is not None else 1.0) if fault.status == 429 else None
            return fault.status, after
        knobs = self.knobs
        if knobs.rate_limit_per_s > 0 and (wait := self._take_token(account)) is not None:
            self.stats.reject(429)
            return 429, float(max(1, math.ceil(wait)))
        if knobs.error_rate_5xx > 0 and self.rng.random() < knobs.error_rate_5xx:
            self.stats.reject(500)
            return 500, None
        return None

    def accept(
        self,
        platform: str,
        account: str,
        to: str,
        callback_data: str | None,
        *,
        callback_url: str | None = None,
        queued_callback: bool = False,
        sender: str | None = None,
    ) -> Sent:
        """Accept a send of Messenger, Instagram, Twilio or Telegram (after ``gate``).

        Messenger and Twilio deliver after the drawn latency like WhatsApp. Instagram and Telegram confirm a
        message in the send's answer (synchronous), so the message takes its place in the conversation on
        acceptance: the receipt is written at once (the device order is the acceptance order), as the answer's
        promise. ``callback_data``: inturn's routing data (``X-Inturn-Callback-Data``, or Twilio's StatusCallback
        query) for the receipt log."""
        knobs = self.knobs
        self._next_id += 1
        serial = f"{self._run_id}{self._next_id:010X}"
        if platform == "twilio":
            pmid = f"SM{serial.lower():0>32}"[-34:]
        elif platform == "telegram":
            number = self._telegram_ids[to] = self._telegram_ids.get(to, 0) + 1
            pmid = str(number)
        elif platform == "instagram":
            pmid = f"aWdfSIM{serial}"
        else:
            pmid = f"m_SIM{serial}"
        synchronous = platform in ("instagram", "telegram")
        fate, read, room_id, message_id = self._draw(callback_data, can_fail=not synchronous)
        at = now_ms()
        sent = Sent(
            pmid, to, account, callback_data, room_id, message_id, at, fate, read, self.generation, platform,
            callback_url, sender,
        )  # fmt: skip
        self.stats.accepted += 1
        loop = asyncio.get_running_loop()
        if synchronous:
            receipt = self.receipts.record(to, account, room_id, message_id, pmid, at, at)
            self.stats.deliveries += 1
            if receipt["duplicate"]:
                self.stats.duplicates += 1
            if platform == "instagram" and read and fate != DROP:
                loop.call_later(knobs.read_delay_ms / 1000, self._due, [sent], "read")
            return sent
        if queued_callback:  # a Messaging Service's message: created 'accepted', then called back 'queued'
            self.sender.enqueue(Status(sent, "queued", at))
        if platform == "messenger":
            self._in_flight.setdefault((account, to), []).append(at)
        self.stats.pending += 1
        loop.call_at(loop.time() + self.latency.draw(), self._arrive, sent)
        return sent

    def _arrive(self, sent: Sent) -> None:
        if sent.generation != self.generation:
            return
        self.stats.pending -= 1
        at = now_ms()
        if sent.platform == "messenger":
            self._in_flight[(sent.phone_number_id, sent.to)].remove(sent.accepted_at_ms)
        if sent.fate == FAIL:
            self.stats.failed_messages += 1
            if sent.platform == "whatsapp":
                self.sender.enqueue(Status(sent, "failed", at))
            elif sent.platform == "twilio":
                self.sender.enqueue(Status(sent, "undelivered", at))
            # Messenger has no failure event: the message is simply never delivered.
            return
        receipt = self.receipts.record(
            sent.to, sent.phone_number_id, sent.room_id, sent.message_id, sent.wamid, sent.accepted_at_ms, at, sent.via
        )
        self.stats.deliveries += 1
        if receipt["duplicate"]:
            self.stats.duplicates += 1
        if sent.fate == DROP:
            self.stats.callbacks_dropped += 1
            return
        if sent.platform == "messenger":
            key = (sent.phone_number_id, sent.to)
            waiting = self._undelivered.setdefault(key, [])
            waiting.append(sent)
            if len(waiting) == 1:  # one delivery callback per recipient covers what arrived in the meantime
                loop = asyncio.get_running_loop()
                loop.call_later(self.knobs.delivered_delay_ms / 1000, self._deliveries_due, key, self.generation)
            return
        self.sender.enqueue(Status(sent, "sent", at))

    def _deliveries_due(self, key: tuple[str, str], generation: int) -> None:
        """One Messenger delivery callback for a recipient: the watermark is the newest acceptance time every
        earlier send of the recipient has reached the device by (a send still on its way holds it back), ``mids``
        the sends it covers, left out at ``messenger_mids_absent_rate``."""
        if generation != self.generation:
            return
        waiting = self._undelivered.pop(key, [])
        if not waiting:
            return
        watermark = max(s.accepted_at_ms for s in waiting)
        in_flight = self._in_flight.get(key)
        if in_flight:
            watermark = min(watermark, min(in_flight) - 1)
        covered = [s for s in waiting if s.accepted_at_ms <= watermark]
        rest = [s for s in waiting if s.accepted_at_ms > watermark]
        if rest:  # arrived, but an earlier send has not: covered by a later callback
            self._undelivered[key] = rest
            loop = asyncio.get_running_loop()
            loop.call_later(self.knobs.delivered_delay_ms / 1000, self._deliveries_due, key, generation)
        if not covered:
            return
        absent = self.knobs.messenger_mids_absent_rate
        mids = None if absent > 0 and self.rng.random() < absent else [s.wamid for s in covered]
        self.sender.enqueue(Status(covered[-1], "delivered", watermark, mids))

    def _status_called_back(self, batch: list[Status]) -> None:
        # The next status of each message becomes due only now, so they reach the webhook in order.
        chained = [s for s in batch if s.sent.platform in ("whatsapp", "twilio")]
        delivered = [s.sent for s in chained if s.status == "sent" and s.sent.generation == self.generation]
        read = [s.sent for s in chained if s.status == "delivered" and s.sent.read]
        loop = asyncio.get_running_loop()
        if delivered:
            loop.call_later(self.knobs.delivered_delay_ms / 1000, self._due, delivered, "delivered")
        if read:
            loop.call_later(self.knobs.read_delay_ms / 1000, self._due, read, "read")

    def _due(self, sents: list[Sent], status: str) -> None:
        at = now_ms()
        for sent in sents:
            if sent.generation == self.generation:
                self.sender.enqueue(Status(sent, status, at))

    def _take_token(self, phone_number_id: str) -> float | None:
        """None when a send may go; else the seconds until the number's bucket holds a token again."""
        rate = self.knobs.rate_limit_per_s
        now = time.monotonic()
        bucket = self._buckets.get(phone_number_id)
        if bucket is None:
            bucket = self._buckets[phone_number_id] = [rate, now]
        tokens = min(rate, bucket[0] + (now - bucket[1]) * rate)
        bucket[1] = now
        if tokens >= 1:
            bucket[0] = tokens - 1
            return None
        bucket[0] = tokens
        return (1 - tokens) / rate

    def _take_fault(self, account: str, to: str) -> Fault | None:
        now = time.monotonic()
        for fault in list(self.faults):
            if fault.until is not None and now >= fault.until:
                self.faults.remove(fault)  # a storm that is over
                continue
            if (fault.recipient is None or fault.recipient == to) and (
                fault.account is None or fault.account == account
            ):
                if fault.until is None:
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self.faults.remove(fault)
                return fault
        return None

    def _fault_answer(self, fault: Fault) -> Answer:
        self.stats.reject(fault.status)
        headers = None
        if fault.status == 429:
            after = fault.retry_after if fault.retry_after is not None else 1
            headers = {"Retry-After": f"{after:g}"}
        return Answer(fault.status, meta.error_body(fault.status, "Injected by POST /_sim/faults."), headers)

    # --- control -----------------------------------------------------------------------------------

    def configure(self, update: KnobsUpdate) -> dict[str, Any]:
        """Apply a partial knob update; held statuses of recipients no longer withheld are sent."""
        values = update.model_dump(exclude_unset=True, exclude_none=True)
        median = values.get("latency_median_ms", self.knobs.latency_median_ms)
        p99 = values.get("latency_p99_ms", self.knobs.latency_p99_ms)
        if p99 < median:
            raise ValueError("latency_p99_ms must be >= latency_median_ms")
        if (seed := values.pop("seed", None)) is not None:
            self.seed = seed
            self.rng.seed(seed)
        if (withhold := values.pop("withhold_recipients", None)) is not None:
            self.knobs.withhold_recipients = frozenset(withhold)
        for name, value in values.items():
            setattr(self.knobs, name, value)
        self.latency = Latency(self.rng, median, p99, self.knobs.latency_max_ms)
        if "rate_limit_per_s" in values:
            self._buckets.clear()
        self.sender.release([r for r in self.sender.held_recipients() if r not in self.knobs.withhold_recipients])
        return self.knob_values()

    def knob_values(self) -> dict[str, Any]:
        """The current knobs as JSON-ready data."""
        values = {name: getattr(self.knobs, name) for name in Knobs.__dataclass_fields__}
        values["withhold_recipients"] = sorted(self.knobs.withhold_recipients)
        values["seed"] = self.seed
        return values

    def release(self, recipients: Iterable[str] | None) -> int:
        """Stop withholding ``recipients`` (all when None) and send their held statuses; returns how many."""
        names = set(self.sender.held_recipients() if recipients is None else recipients)
        if recipients is None:
            names |= self.knobs.withhold_recipients
        self.knobs.withhold_recipients = self.knobs.withhold_recipients - names
        return self.sender.release(sorted(names))

    def add_fault(self, fault: Fault) -> None:
        """Queue a one-shot answer."""
        self.faults.append(fault)

    def reset(self) -> None:
        """Clear receipts, counters, faults, rate buckets and every pending delivery or callback; re-seed."""
        self.generation += 1
        self.receipts.clear()
        self.sender.clear()
        self.stats.clear()
        self.faults.clear()
        self._buckets.clear()
        self._telegram_ids.clear()
        self._in_flight.clear()
        self._undelivered.clear()
        self.rng.seed(self.seed)


def _invalid(body: Any) -> str | None:
    """Why a send body is not a valid Cloud API message (None when it is)."""
    if not isinstance(body, dict):
        return "The request body must be a JSON object."
    if body.get("messaging_product") != "whatsapp":
        return "Param messaging_product must be 'whatsapp'."
    to = body.get("to")
    if not isinstance(to, str) or not to:
        return "Param to is required."
    kind = body.get("type", "text")
    if kind not in MESSAGE_TYPES:
        return f"Param type must be one of {sorted(MESSAGE_TYPES)}."
    if not isinstance(body.get(kind), dict):
        return f"Param {kind} is required for type {kind}."
    data = body.get("biz_opaque_callback_data")
    if data is not None and (not isinstance(data, str) or len(data) > 512):
        return "Param biz_opaque_callback_data must be a string of at most 512 characters."
    return None
