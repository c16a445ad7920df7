"""The fault tests' TCP proxy (tests/support/proxy.py): it forwards, blackholes without closing, and heals."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from tests.support.proxy import TcpProxy


@pytest.fixture
def echo_port() -> Iterator[int]:
    """A loopback echo server's port."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    def echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(5)
    server.close()


def roundtrip(conn: socket.socket, data: bytes) -> bytes:
    conn.sendall(data)
    return conn.recv(4096)


def test_the_proxy_forwards_blackholes_without_closing_and_heals(echo_port: int) -> None:
    with TcpProxy(echo_port) as proxy:
        conn = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        assert roundtrip(conn, b"one") == b"one"
        proxy.blackhole()
        conn.settimeout(0.5)  # the bound of this negative check: nothing comes back meanwhile
        conn.sendall(b"two")
        with pytest.raises(TimeoutError):
            conn.recv(4096)
        fresh = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)  # accepted, reaches nothing
        fresh.settimeout(0.5)
        fresh.sendall(b"three")
        with pytest.raises(TimeoutError):
            fresh.recv(4096)
        proxy.heal(reset=False)  # the held bytes move on: nothing was dropped
        conn.settimeout(5)
        fresh.settimeout(5)
        assert conn.recv(4096) == b"two"
        assert fresh.recv(4096) == b"three"
        proxy.blackhole()
        proxy.heal(reset=True)  # connections that lived through the cut are closed
        assert conn.recv(4096) == b""
        again = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        assert roundtrip(again, b"four") == b"four"
        for c in (conn, fresh, again):
            c.close()
        assert proxy.connections == 3
