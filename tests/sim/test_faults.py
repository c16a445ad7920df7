"""Faults on demand and at configured rates: auth, validation, 429, 5xx, withheld, dropped, failed, duplicates."""

from __future__ import annotations

import time
from collections.abc import Callable

import aiohttp

from inturn.settings.sim import SimSettings
from inturn_devtools.receipts import check
from inturn_devtools.waiting import eventually
from inturn_sim.run import running_sim

from .support import AUTH, Hook, control, message, send


def meta_error(answer: object, code: int) -> None:
    """Assert ``answer`` is Meta's Graph API error object with ``code``."""
    assert isinstance(answer, dict)
    error = answer["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["type"] == "OAuthException"
    assert error["fbtrace_id"]


async def test_a_send_without_the_right_bearer_token_gets_401_and_is_not_accepted(
    sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings()) as sim:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "test-token"}):
            status, answer, _ = await send(client, sim, message("491701"), headers=headers)
            assert status == 401
            meta_error(answer, 190)
        stats = await control(client, sim, "stats")
    assert stats["accepted"] == 0
    assert stats["rejected"] == {"401": 3}


async def test_a_malformed_send_gets_400_in_metas_error_shape(
    sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    good = message("491701")
    bad_bodies = [
        {**good, "messaging_product": "sms"},
        {k: v for k, v in good.items() if k != "to"},
        {**good, "type": "hologram"},
        {**good, "type": "image"},  # no image object
        {**good, "biz_opaque_callback_data": "x" * 513},
        ["not", "an", "object"],
    ]
    async with running_sim(sim_settings()) as sim:
        for body in bad_bodies:
            status, answer, _ = await send(client, sim, body)
            assert status == 400, body
            meta_error(answer, 100)
        async with client.post(sim.send_url(), data=b"{not json", headers=AUTH) as raw:
            assert raw.status == 400
            meta_error(await raw.json(), 100)
        assert sim.sim.stats.accepted == 0


async def test_queued_429s_hit_only_the_named_recipient_and_carry_retry_after(
    sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings()) as sim:
        await control(client, sim, "faults", {"recipient": "491701", "status": 429, "count": 2, "retry_after": 3})
        status, answer, headers = await send(client, sim, message("491701"))
        assert (status, headers["Retry-After"]) == (429, "3")
        meta_error(answer, 130429)
        assert (await send(client, sim, message("491702")))[0] == 200  # another recipient is not affected
        assert (await send(client, sim, message("491701")))[0] == 429
        assert (await send(client, sim, message("491701")))[0] == 200  # the two are used up


async def test_sends_above_the_per_number_rate_get_429_while_other_numbers_go_through(
    sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings(rate_limit_per_s=2)) as sim:
        answers = [await send(client, sim, message("491701"), phone_number_id="111") for _ in range(12)]
        other = await send(client, sim, message("491701"), phone_number_id="222")
    codes = [status for status, _, _ in answers]
    assert codes[:2] == [200, 200]  # the bucket starts full: one second's worth
    assert codes.count(429) >= 6  # even if the twelve sends took two seconds (four refilled tokens)
    limited = next(a for a in answers if a[0] == 429)
    meta_error(limited[1], 130429)
    assert int(limited[2]["Retry-After"]) >= 1
    assert other[0] == 200


async def test_5xx_on_demand_and_at_a_configured_rate(
    sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings()) as sim:
        await control(client, sim, "faults", {"status": 500})
        await control(client, sim, "faults", {"status": 503})
        first, second, third = [await send(client, sim, message("491701")) for _ in range(3)]
        assert (first[0], second[0], third[0]) == (500, 503, 200)
        meta_error(first[1], 131000)
        meta_error(second[1], 2)
        await control(client, sim, "config", {"error_rate_5xx": 1.0})
        assert (await send(client, sim, message("491701")))[0] == 500
        await control(client, sim, "config", {"error_rate_5xx": 0.0})
        assert (await send(client, sim, message("491701")))[0] == 200
        stats = await control(client, sim, "stats")
    assert stats["rejected"] == {"500": 2, "503": 1}
    assert stats["accepted"] == 2


async def test_a_withheld_recipients_callbacks_wait_until_released(
    hook: Hook, sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings()) as sim:
        await control(client, sim, "config", {"withhold_recipients": ["491701", "491703"]})
        held = (await send(client, sim, message("491701")))[1]["messages"][0]["id"]
        free = (await send(client, sim, message("491702")))[1]["messages"][0]["id"]
        held_too = (await send(client, sim, message("491703")))[1]["messages"][0]["id"]
        await eventually(lambda: hook.of(free) == ["sent", "delivered"], 5, "the free recipient's statuses", every=0.01)
        await eventually(lambda: sim.sim.stats.withheld == 2, 5, "two held statuses", every=0.01)
        # the messages did reach the devices; only their callbacks are held
        assert sim.sim.stats.deliveries == 3
        assert hook.of(held) == []
        assert hook.of(held_too) == []
        assert (await control(client, sim, "release", {"recipients": ["491701"]})) == {"released": 1}
        await eventually(
            lambda: hook.of(held) == ["sent", "delivered"], 5, "the released recipient's statuses", every=0.01
        )
        assert hook.of(held_too) == []
        # a config change that stops withholding releases too
        await control(client, sim, "config", {"withhold_recipients": []})
        await eventually(
            lambda: hook.of(held_too) == ["sent", "delivered"], 5, "statuses released by config", every=0.01
        )
        assert sim.sim.stats.withheld == 0


async def test_the_drop_rate_is_roughly_respected_over_many_messages(
    hook: Hook, sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    count = 300
    async with running_sim(sim_settings(drop_rate=0.25, seed=3, delivered_delay_ms=0)) as sim:
        for n in range(count):
            await send(client, sim, message(f"49170{n % 50:03d}", f"room-{n % 50}", f"m{n}"))
        await eventually(lambda: sim.sim.stats.deliveries == count, 5, "every message at the device", every=0.01)
        dropped = sim.sim.stats.callbacks_dropped
        await eventually(
            lambda: hook.of_status("delivered") == count - dropped, 5, "statuses of the others", every=0.01
        )
        assert hook.of_status("sent") == count - dropped
    assert 0.18 * count <= dropped <= 0.32 * count
    assert len({s["id"] for s in hook.statuses}) == count - dropped


async def test_an_accepted_message_can_fail_later_with_a_failed_status(
    hook: Hook, sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings(failed_rate=1.0)) as sim:
        status, answer, _ = await send(client, sim, message("491701", "room-A", "m1"))
        assert status == 200
        wamid = answer["messages"][0]["id"]
        await eventually(lambda: hook.of(wamid) == ["failed"], 5, "the failed status", every=0.01)
        assert (await control(client, sim, "receipts"))["receipts"] == []  # it never reached the device
    failed = hook.statuses[0]
    assert failed["errors"][0]["code"] == 131026
    assert failed["biz_opaque_callback_data"] == '{"r":"room-A","m":"m1"}'


async def test_the_same_room_message_delivered_twice_is_counted_as_a_duplicate(
    hook: Hook, sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings()) as sim:
        for message_id in ("m1", "m2", "m1"):  # a re-send of m1, as after a worker crash
            await send(client, sim, message("491701", "room-A", message_id))
        await eventually(lambda: sim.sim.stats.deliveries == 3, 5, "three deliveries", every=0.01)
        log = await control(client, sim, "receipts")
        stats = await control(client, sim, "stats")
    assert [r["duplicate"] for r in log["receipts"]] == [False, False, True]
    assert (stats["duplicates"], log["duplicates"]) == (1, 1)
    report = check(log["receipts"], {"room-A": ["m1", "m2"]})
    # m1 again after m2: the device saw an older message after a newer one, which the checker calls a stale
    # re-send and counts as reordering, not as a duplicate
    assert (report.duplicated, report.lost, report.reordered, report.stale) == (0, 0, 1, 1)


async def test_a_failing_webhook_is_retried_with_backoff_then_given_up(
    hook: Hook, sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings(callback_retries=2)) as sim:
        hook.answers = [500, 503]  # fails twice, then accepts
        wamid = (await send(client, sim, message("491701")))[1]["messages"][0]["id"]
        await eventually(lambda: hook.of(wamid) == ["sent", "delivered"], 5, "statuses after two retries", every=0.01)
        assert sim.sim.stats.callback_retries == 2
        hook.answers = [500, 500, 500]  # more than the retries allow
        wamid = (await send(client, sim, message("491701")))[1]["messages"][0]["id"]
        await eventually(lambda: sim.sim.stats.callbacks_failed == 1, 5, "a status given up", every=0.01)
        await eventually(lambda: hook.of(wamid) == ["delivered"], 5, "the next status still sent", every=0.01)
    assert hook.bad_signatures == 0


async def test_reset_clears_receipts_counters_and_faults(
    sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings(latency_median_ms=2000, latency_p99_ms=2000)) as sim:
        await send(client, sim, message("491701", "room-A", "m1"))  # still on its way at the reset
        await control(client, sim, "faults", {"status": 503, "count": 5})
        await control(client, sim, "reset", {})
        assert (await send(client, sim, message("491701")))[0] == 200
        stats = await control(client, sim, "stats")
        assert (stats["accepted"], stats["pending"], stats["rejected"]) == (1, 1, {})
        assert (await control(client, sim, "receipts"))["receipts"] == []


async def test_config_refuses_unknown_knobs_and_bad_values(
    sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings()) as sim:
        for body in ({"no_such_knob": 1}, {"drop_rate": 2}, {"latency_median_ms": 500, "latency_p99_ms": 100}):
            async with client.post(f"{sim.url}/_sim/config", json=body) as answer:
                assert answer.status == 400, body
        knobs = await control(client, sim, "config", {"latency_median_ms": 50, "latency_p99_ms": 50})
        assert (knobs["latency_median_ms"], knobs["latency_p99_ms"]) == (50, 50)
        async with client.post(f"{sim.url}/_sim/faults", json={"status": 418}) as answer:
            assert answer.status == 400


async def test_probes_and_metrics_answer(
    sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings()) as sim:
        await send(client, sim, message("491701"))
        await send(client, sim, message("491701"), headers={})
        for path in ("/healthz", "/readyz", "/_sim/health"):
            async with client.get(sim.url + path) as answer:
                assert answer.status == 200, path
        async with client.get(sim.url + "/metrics") as answer:
            text = await answer.text()
    assert "inturn_sim_messages_accepted_total 1.0" in text
    assert 'inturn_sim_requests_rejected_total{status="401"} 1.0' in text


async def test_a_429_storm_on_one_account_refuses_its_sends_for_its_duration_and_spares_the_others(
    sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings()) as sim:
        await control(client, sim, "faults", {"account": "111", "status": 429, "for_s": 0.5, "retry_after": 2})
        storm = [await send(client, sim, message("491701"), phone_number_id="111") for _ in range(5)]
        other = await send(client, sim, message("491701"), phone_number_id="222")
        assert [(status, headers["Retry-After"]) for status, _, headers in storm] == [(429, "2")] * 5
        meta_error(storm[0][1], 130429)
        assert other[0] == 200  # another account's sends go through during the storm
        storm_ends = max(f.until or 0.0 for f in sim.sim.faults)
        await eventually(lambda: time.monotonic() >= storm_ends, 5, "the storm's end", every=0.05)
        assert (await send(client, sim, message("491701"), phone_number_id="111"))[0] == 200
        stats = await control(client, sim, "stats")
    assert (stats["rejected"], stats["accepted"]) == ({"429": 5}, 2)


async def test_delayed_callbacks_arrive_late_and_out_of_send_order(
    hook: Hook, sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    knobs = {"callback_delay_median_ms": 100, "callback_delay_p99_ms": 2000, "callback_delay_max_ms": 3000, "seed": 5}
    async with running_sim(sim_settings(**knobs)) as sim:
        wamids = []
        for n in range(40):
            wamids.append((await send(client, sim, message(f"4917{n:02d}", f"room-{n}", "m1")))[1]["messages"][0]["id"])
        await eventually(lambda: hook.of_status("delivered") == 40, 15, "every status, late", every=0.05)
        stats = await control(client, sim, "stats")
    arrival = [s["id"] for s in hook.statuses if s["status"] == "sent"]
    assert sorted(arrival) == sorted(wamids)
    assert arrival != wamids  # the delays reorder callbacks across messages
    assert stats["callbacks_delayed"] == 80  # sent and delivered of each
    for wamid in wamids:
        assert hook.of(wamid) == ["sent", "delivered"]  # one message's statuses stay in order


async def test_duplicated_callbacks_repeat_answered_requests_later(
    hook: Hook, sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    knobs = {"callback_duplicate_rate": 1.0, "callback_duplicate_delay_ms": 300, "callback_batch_max": 1}
    async with running_sim(sim_settings(**knobs)) as sim:
        wamid = (await send(client, sim, message("491701", "room-A", "m1")))[1]["messages"][0]["id"]
        await eventually(lambda: len(hook.of(wamid)) == 4, 5, "each status twice", every=0.01)
        stats = await control(client, sim, "stats")
    assert sorted(hook.of(wamid)) == ["delivered", "delivered", "sent", "sent"]
    assert stats["callbacks_duplicated"] == 2
    assert stats["callbacks_by_status"] == {"sent": 1, "delivered": 1}  # the duplicates are not counted as sent


async def test_a_send_under_via_names_its_sender_in_the_receipt(
    sim_settings: Callable[..., SimSettings], client: aiohttp.ClientSession
) -> None:
    async with running_sim(sim_settings()) as sim:
        url = f"{sim.url}/_via/w1/v21.0/100200300/messages"
        async with client.post(url, json=message("491701", "room-A", "m1"), headers=AUTH) as answer:
            assert answer.status == 200
        await send(client, sim, message("491701", "room-A", "m2"))
        await eventually(lambda: sim.sim.stats.deliveries == 2, 5, "both at the device", every=0.01)
        log = await control(client, sim, "receipts")
    by_message = {r["message_id"]: r for r in log["receipts"]}
    assert by_message["m1"]["via"] == "w1"
    assert "via" not in by_message["m2"]
