"""The delivery model: statuses in order, signed and echoed; overlapping sends overtake, gated sends do not."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

import aiohttp

from inturn.schemas import encode_callback_data
from inturn.settings.sim import SimSettings
from inturn_devtools.receipts import check, fetch_receipts
from inturn_devtools.waiting import eventually
from inturn_sim.run import RunningSim, running_sim

from .support import Hook, control, message, send


async def test_with_no_loss_and_fixed_latency_every_send_yields_its_statuses_in_order_signed_and_echoed(
    hook: Hook, sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    settings = sim_settings(latency_median_ms=30, latency_p99_ms=30, read_rate=1.0, read_delay_ms=5)
    async with running_sim(settings) as sim:
        sends: list[tuple[str, str, str]] = []  # (wamid, recipient, callback data)
        for n in range(12):
            to = f"4917000{n % 3}"
            status, answer, _ = await send(client, sim, message(to, f"room-{n % 3}", f"m{n}"))
            assert status == 200
            assert answer["messaging_product"] == "whatsapp"
            assert answer["contacts"] == [{"input": to, "wa_id": to}]
            sends.append((answer["messages"][0]["id"], to, encode_callback_data(f"room-{n % 3}", f"m{n}")))
        await eventually(lambda: len(hook.statuses) == 36, 5, "sent, delivered and read of 12 sends", every=0.01)

        assert hook.bad_signatures == 0
        assert len({wamid for wamid, _, _ in sends}) == 12
        for wamid, to, data in sends:
            assert hook.of(wamid) == ["sent", "delivered", "read"]
            for callback in (s for s in hook.statuses if s["id"] == wamid):
                assert callback["recipient_id"] == to
                assert callback["biz_opaque_callback_data"] == data
                assert callback["phone_number_id"] == "100200300"
                assert re.fullmatch(r"\d{10}\.\d{3}", callback["timestamp"])
                assert "errors" not in callback
        # a fixed latency keeps device order = send order, and no message arrives before its latency passed
        receipts = (await control(client, sim, "receipts"))["receipts"]
        assert [r["wamid"] for r in receipts] == [wamid for wamid, _, _ in sends]
        assert all(r["delivered_at_ms"] - r["accepted_at_ms"] >= 29 for r in receipts)
        assert [(r["room_id"], r["message_id"]) for r in receipts] == [(f"room-{n % 3}", f"m{n}") for n in range(12)]
        stats = await control(client, sim, "stats")
        assert stats["callbacks_by_status"] == {"sent": 12, "delivered": 12, "read": 12}
        assert (stats["accepted"], stats["deliveries"], stats["pending"], stats["callbacks_failed"]) == (12, 12, 0, 0)


async def _send_one_room(
    client: aiohttp.ClientSession,
    sim: RunningSim,
    count: int,
    after_each: Callable[[str, str], Awaitable[None]] | None = None,
) -> dict[str, list[str]]:
    """Send messages m0..m<count-1> of room-A to one recipient, one after another, each accepted (200); with
    ``after_each``, await it with (message id, wamid) after each send before the next. Returns what was produced,
    as ``check`` takes it."""
    produced = [f"m{n}" for n in range(count)]
    for message_id in produced:
        status, answer, _ = await send(client, sim, message("491701", "room-A", message_id))
        assert status == 200
        if after_each is not None:
            await after_each(message_id, answer["messages"][0]["id"])
    return {"room-A": produced}


async def test_overlapping_sends_to_one_recipient_reach_the_device_out_of_send_order(
    hook: Hook, sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    settings = sim_settings(latency_median_ms=60, latency_p99_ms=400, seed=7)
    count = 80
    async with running_sim(settings) as sim:
        # each send starts before the previous one reached the device
        produced = await _send_one_room(client, sim, count)
        await eventually(lambda: sim.sim.stats.deliveries == count, 5, "every message at the device", every=0.01)
        receipts = await fetch_receipts(sim.url)
    report = check(receipts, produced)
    assert report.lost == 0
    assert report.duplicated == 0
    # A random order would invert about half of the adjacent pairs; require a clearly measurable share.
    assert report.reordered / (count - 1) > 0.2, report.summary()


async def test_sends_gated_on_each_sent_callback_reach_the_device_in_send_order(
    hook: Hook, sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async def sent(message_id: str, wamid: str) -> None:
        await eventually(lambda: "sent" in hook.of(wamid), 5, f"sent of {message_id}", every=0.01)

    settings = sim_settings(latency_median_ms=10, latency_p99_ms=150, seed=7)
    async with running_sim(settings) as sim:
        produced = await _send_one_room(client, sim, 25, after_each=sent)
        receipts = (await control(client, sim, "receipts"))["receipts"]
    report = check(receipts, produced)
    assert report.ok(), report.summary()
    assert [r["message_id"] for r in receipts] == produced["room-A"]


async def test_statuses_that_fall_due_together_are_batched_up_to_the_bound(
    hook: Hook, sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    settings = sim_settings(callback_batch_max=10, callback_concurrency=2)
    async with running_sim(settings) as sim:
        await control(client, sim, "config", {"withhold_recipients": ["491701"]})
        for n in range(30):
            await send(client, sim, message("491701", "room-A", f"m{n}"))
        await eventually(lambda: sim.sim.stats.withheld == 30, 5, "30 statuses held back", every=0.01)
        assert hook.statuses == []
        assert (await control(client, sim, "release", {"recipients": ["491701"]})) == {"released": 30}
        await eventually(lambda: hook.of_status("sent") == 30, 5, "30 sent statuses", every=0.01)
    assert max(hook.requests) == 10
    assert hook.requests[:3] == [10, 10, 10]


async def test_whole_second_timestamps_as_meta_sends_them(
    hook: Hook, sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings(timestamp_precision="s")) as sim:
        _, answer, _ = await send(client, sim, message("491701"))
        await eventually(lambda: len(hook.statuses) == 2, 5, "sent and delivered", every=0.01)
    assert all(re.fullmatch(r"\d{10}", s["timestamp"]) for s in hook.statuses)
    assert all("biz_opaque_callback_data" not in s for s in hook.statuses)  # none sent, none echoed
    assert hook.of(answer["messages"][0]["id"]) == ["sent", "delivered"]
