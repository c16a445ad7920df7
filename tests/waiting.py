"""The one way the tests wait: for a condition, with a deadline, failing with what was awaited.

Never a bare ``sleep`` standing in for a condition: the condition is polled every ``every`` seconds until it
holds, and the test fails with ``what`` (a string, or a callable that describes the state at the deadline) when
``within`` seconds pass first.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

Description = str | Callable[[], str]


def _describe(what: Description) -> str:
    return what() if callable(what) else what


def wait_until(
    condition: Callable[[], object],
    within: float,
    what: Description,
    *,
    every: float = 0.05,
    ignore: tuple[type[BaseException], ...] = (),
) -> None:
    """Poll ``condition`` (blocking) until it returns something true; ``ignore`` lists errors that mean "not yet"
    (a server not listening yet). ``AssertionError`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        try:
            if condition():
                return
        except ignore:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for: {_describe(what)}")
        time.sleep(every)


async def eventually(
    condition: Callable[[], bool | Awaitable[bool]],
    within: float,
    what: Description,
    *,
    every: float = 0.05,
    blocking: bool = False,
) -> None:
    """``wait_until`` for a test on the event loop: ``condition`` may return an awaitable (a database query), or
    block (``blocking``: it then runs on a thread, so the loop keeps serving the code under test)."""
    deadline = time.monotonic() + within

    async def holds() -> bool:
        result = await asyncio.to_thread(condition) if blocking else condition()
        return bool(await result if inspect.isawaitable(result) else result)

    while not await holds():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for: {_describe(what)}")
        await asyncio.sleep(every)
