"""A loopback TCP proxy the fault tests control: forward, blackhole, heal.

``TcpProxy(target_port).start()`` listens on 127.0.0.1 (``port``) and forwards every connection to the target,
on an asyncio loop of its own thread, so synchronous tests can drive it while the services under test run as
separate processes.

- ``blackhole()``: a network partition as a service sees it: nothing more is forwarded in either direction, but no
  connection is closed (reads stop, so what the peers write piles up in socket buffers and then blocks them). New
  connections are accepted and get nothing either: a connect succeeds, no answer ever comes. Nothing is dropped
  mid-stream, so a protocol's framing is never corrupted.
- ``heal(reset=True)``: forward again; with ``reset`` the connections that lived through the blackhole are closed
  first (as their peers' TCP keep-alive or request timeouts would have done), else they resume where they stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from concurrent.futures import Future
from types import TracebackType
from typing import Any

from inturn_devtools.process import free_port

CHUNK = 65536


class TcpProxy:
    """One listening port forwarding to ``target_host:target_port``."""

    def __init__(self, target_port: int, *, port: int | None = None, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = port or free_port()
        self.connections = 0  # accepted so far
        self.cut_at: float | None = None  # time.time() of the last blackhole()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"proxy-{self.port}", daemon=True)
        self._open: asyncio.Event | None = None
        self._server: asyncio.Server | None = None
        self._links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter | None, asyncio.Task[Any]]] = set()

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``: what clients connect to."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> TcpProxy:
        """Listen and forward."""
        self._thread.start()
        self._call(self._start()).result(10)
        return self

    def blackhole(self) -> None:
        """Stop forwarding in both directions without closing anything."""
        self.cut_at = time.time()
        self._call(self._set(False)).result(10)

    def heal(self, reset: bool = True) -> None:
        """Forward again; ``reset``: close the connections that lived through the blackhole first."""
        self._call(self._heal(reset)).result(10)

    def stop(self) -> None:
        """Close the listener and every connection, and end the proxy's thread."""
        if not self._thread.is_alive():
            return
        self._call(self._close()).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.stop()

    # --- on the proxy's loop -------------------------------------------------------------------------

    def _call(self, coroutine: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    async def _start(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def _set(self, forwarding: bool) -> None:
        assert self._open is not None
        if forwarding:
            self._open.set()
        else:
            self._open.clear()

    async def _heal(self, reset: bool) -> None:
        if reset:
            await self._drop_links()
        await self._set(True)

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        await self._drop_links()

    async def _drop_links(self) -> None:
        links = list(self._links)
        self._links.clear()
        for client, upstream, task in links:
            task.cancel()
            for writer in (client, upstream):
                if writer is not None:
                    writer.transport.abort()
        await asyncio.gather(*(task for _, _, task in links), return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        link: list[Any] = [writer, None, task]
        self._links.add((writer, None, task))
        try:
            assert self._open is not None
            await self._open.wait()  # a connection made during a blackhole reaches nothing until it heals
            up_reader, up_writer = await asyncio.open_connection(*self.target)
            self._links.discard((writer, None, task))
            link[1] = up_writer
            self._links.add((writer, up_writer, task))
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError):
            pass  # a side went away: close the other
        finally:
            self._links.discard((writer, link[1], task))
            for side in (writer, link[1]):
                if side is not None:
                    with contextlib.suppress(Exception):  # already closed or aborted
                        side.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._open is not None
        while True:
            await self._open.wait()  # blackholed: stop reading, so nothing moves and nothing is lost
            data = await reader.read(CHUNK)
            if not data:
                writer.close()
                return
            await self._open.wait()  # cut while this chunk was in hand: hold it
            writer.write(data)
            await writer.drain()
