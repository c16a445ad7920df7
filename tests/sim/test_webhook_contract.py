"""The simulator's callbacks are what inturn's webhook reads: its own signature check and parser accept them."""

from __future__ import annotations

from collections.abc import Callable

import aiohttp

from inturn.settings.sim import SimSettings
from inturn_devtools.waiting import eventually
from inturn_sim.run import running_sim
from inturn_webhook.rooms import RoomResolver
from inturn_webhook.signature import verify
from inturn_webhook.statuses import parse_meta

from .support import APP_SECRET, Hook, control, message, send


async def test_the_webhook_verifies_and_parses_every_callback_the_simulator_sends(
    hook: Hook, sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings(read_rate=1.0, read_delay_ms=0)) as sim:
        for n in range(6):
            await send(client, sim, message(f"49170{n % 2}", f"room-{n % 2}", f"m{n}"), phone_number_id=f"10{n % 3}")
        await eventually(lambda: len(hook.statuses) == 6 * 3, 5, "sent, delivered and read of six sends", every=0.01)
        receipts = (await control(client, sim, "receipts"))["receipts"]
        await control(client, sim, "config", {"failed_rate": 1.0})
        await send(client, sim, message("491709", "room-F", "f1"))
        await eventually(lambda: len(hook.statuses) == 6 * 3 + 1, 5, "the failed status", every=0.01)
    parsed = []
    for raw, signature in hook.raw:
        verify(signature, raw, [APP_SECRET.encode()])  # raises on a bad signature
        callback = parse_meta(raw, RoomResolver(None))
        assert callback.rejected == []
        assert callback.ignored == []
        parsed.extend(callback.statuses)
    assert sorted((s.room_id or "", s.message_id or "", s.status) for s in parsed) == sorted(
        [(f"room-{n % 2}", f"m{n}", status) for n in range(6) for status in ("sent", "delivered", "read")]
        + [("room-F", "f1", "failed")]
    )
    failed = next(s for s in parsed if s.status == "failed")
    assert failed.error is not None
    assert "Message undeliverable" in failed.error
    # millisecond timestamps survive the webhook's parsing: 'sent' is stamped with the device delivery time
    delivered_at = {r["wamid"]: r["delivered_at_ms"] for r in receipts}
    sent = [s for s in parsed if s.status == "sent"]
    assert {s.platform_message_id: s.platform_ts_ms for s in sent} == delivered_at
