"""The one way inturn's tooling and tests wait: for a condition, with a deadline, failing with what was awaited.

Never a bare ``sleep`` standing in for a condition: the condition is polled every ``every`` seconds until it
holds, and ``TimeoutError`` names ``what`` (a string, or a callable that describes the state at the deadline)
when ``within`` seconds pass first. Launchers pass the process they wait for, so a server that died while
starting fails at once with its log's tail instead of at the deadline.
"""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

Description = str | Callable[[], str]


def _describe(what: Description) -> str:
    return what() if callable(what) else what


def tail(log: Path | None, lines: int = 20) -> str:
    """The last lines of ``log``, formatted for an error message ('' when there is none)."""
    if log is None or not log.exists():
        return ""
    text = log.read_text(errors="replace").splitlines()[-lines:]
    return f"; last lines of {log}:\n" + "\n".join(text)


def wait_until(
    condition: Callable[[], object],
    within: float,
    what: Description,
    *,
    every: float = 0.05,
    ignore: tuple[type[BaseException], ...] = (),
    proc: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> None:
    """Poll ``condition`` (blocking) until it returns something true.

    ``ignore`` lists errors that mean "not yet" (a server not listening yet). When ``proc`` is given and exits
    first, ``RuntimeError`` with ``log``'s tail; ``TimeoutError`` after ``within`` seconds.
    """
    deadline = time.monotonic() + within
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{_describe(what)}: the process exited with {proc.returncode}{tail(log)}")
        try:
            if condition():
                return
        except ignore:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {within}s waiting for: {_describe(what)}{tail(log)}")
        time.sleep(every)


async def eventually(
    condition: Callable[[], object | Awaitable[object]],
    within: float,
    what: Description,
    *,
    every: float = 0.05,
    blocking: bool = False,
) -> None:
    """``wait_until`` for code on the event loop: ``condition`` may return an awaitable (a database query), or
    block (``blocking``: it then runs on a thread, so the loop keeps serving the code under test)."""
    deadline = time.monotonic() + within

    async def holds() -> bool:
        result = await asyncio.to_thread(condition) if blocking else condition()
        return bool(await result if inspect.isawaitable(result) else result)

    while not await holds():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {within}s waiting for: {_describe(what)}")
        await asyncio.sleep(every)
