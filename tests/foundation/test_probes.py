"""The probes every aiohttp-served process shares (inturn.probes): statuses and bodies the chart's probes read."""

from __future__ import annotations

import aiohttp
from aiohttp import web

from inturn.probes import add_probes, serve


async def test_probes_answer_200_while_checks_pass_and_503_with_the_reason_once_they_fail() -> None:
    state = {"alive": True, "ready": True}
    app = web.Application()
    add_probes(
        app,
        alive=lambda: (state["alive"], {} if state["alive"] else {"error": "stream ended"}),
        ready=lambda: (state["ready"], {"draining": not state["ready"]}),
        metrics=lambda: b"inturn_test_total 3.0\n",
    )
    runner, port = await serve(app, "127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            answers = []
            for alive, ready in ((True, True), (True, False), (False, False)):
                state.update(alive=alive, ready=ready)
                for path in ("/healthz", "/readyz"):
                    async with http.get(path) as resp:
                        answers.append((path, resp.status, await resp.json()))
            async with http.get("/metrics") as resp:
                metrics = (resp.status, resp.headers["Content-Type"], await resp.text())
    finally:
        await runner.cleanup()
    assert answers == [
        ("/healthz", 200, {"status": "ok"}),
        ("/readyz", 200, {"ready": True, "draining": False}),
        ("/healthz", 200, {"status": "ok"}),
        ("/readyz", 503, {"ready": False, "draining": True}),
        ("/healthz", 503, {"status": "failed", "error": "stream ended"}),
        ("/readyz", 503, {"ready": False, "draining": True}),
    ]
    assert metrics[0] == 200
    assert metrics[1].startswith("text/plain")
    assert metrics[2] == "inturn_test_total 3.0\n"
