"""A scripted HTTP/1.1 server on loopback for the transport's tests, and a throwaway certificate authority.

Each accepted connection runs ``answer(request, conn)`` per request read from it, so a test decides byte by
byte what the platform does: answer with a length or in chunks, close while idle, reset mid-request, stay
silent.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.support.certs import certificate, common_name, private_pem


@dataclass
class Request:
    """One request as the server read it."""

    head: bytes
    body: bytes
    connection: int  # which accepted connection (0, 1, ...) carried it


@dataclass
class Conn:
    """The server's side of one connection."""

    number: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    async def write(self, data: bytes) -> None:
        """Send raw bytes."""
        self.writer.write(data)
        await self.writer.drain()

    def reset(self) -> None:
        """Drop the connection with a TCP reset (no orderly close)."""
        self.writer.transport.abort()


Answer = Callable[[Request, Conn], Awaitable[bool]]  # False: stop serving this connection


@dataclass
class Platform:
    """A running scripted server: its URL, the requests it read and the connections it accepted."""

    url: str
    server: asyncio.Server
    requests: list[Request] = field(default_factory=list)
    accepted: int = 0
    open_now: int = 0
    most_open: int = 0
    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    handlers: list[asyncio.Task[Any]] = field(default_factory=list)


def respond(status: int, body: bytes, *headers: str) -> bytes:
    """An answer with a Content-Length."""
    lines = "".join(f"{h}\r\n" for h in headers)
    return f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n{lines}\r\n".encode() + body


def held_back(body: bytes, release: asyncio.Event, answer: bytes) -> Answer:
    """A platform answering every request with ``answer`` at once, except the one whose body is ``body``, which it
    answers only once ``release`` is set (so requests behind it on a one-connection pool wait in line)."""

    async def held(request: Request, conn: Conn) -> bool:
        if request.body == body:
            await release.wait()
        await conn.write(answer)
        return True

    return held


def chunked(status: int, *parts: bytes) -> bytes:
    """An answer in chunks."""
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)
    return f"HTTP/1.1 {status} X\r\nTransfer-Encoding: chunked\r\n\r\n".encode() + chunks + b"0\r\n\r\n"


async def serve(answer: Answer, tls: ssl.SSLContext | None = None) -> Platform:
    """Start the server on 127.0.0.1 and a free port."""
    platform: Platform

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number = platform.accepted
        platform.accepted += 1
        platform.open_now += 1
        platform.most_open = max(platform.most_open, platform.open_now)
        conn = Conn(number, reader, writer)
        platform.writers.append(writer)
        if (task := asyncio.current_task()) is not None:
            platform.handlers.append(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                request = Request(head, await reader.readexactly(length), number)
                platform.requests.append(request)
                if not await answer(request, conn):
                    return
        except asyncio.CancelledError:
            return  # the test is over (asyncio's stream server would log a cancelled handler as an error)
        finally:
            platform.open_now -= 1
            if not writer.transport.is_closing():
                writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    platform = Platform(f"{'https' if tls else 'http'}://127.0.0.1:{port}", server)
    return platform


async def stop(platform: Platform) -> None:
    """Close the listening socket and every connection."""
    platform.server.close()
    for writer in platform.writers:
        writer.transport.abort()
    for task in platform.handlers:
        task.cancel()
    await platform.server.wait_closed()


def certificate_authority(directory: Path) -> tuple[Path, ssl.SSLContext]:
    """A new CA (its certificate written to ``directory/ca.pem``) and a server context with a certificate it
    signed for 127.0.0.1."""
    ca_key, ca_name = ec.generate_private_key(ec.SECP256R1()), common_name("inturn test CA")
    authority = [
        (x509.BasicConstraints(ca=True, path_length=None), True),
        (x509.KeyUsage(True, False, False, False, False, True, True, False, False), True),
    ]
    ca = certificate(ca_name, ca_key, extensions=authority)
    key = ec.generate_private_key(ec.SECP256R1())
    loopback = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cert = certificate(common_name("127.0.0.1"), key, issuer=(ca_name, ca_key), extensions=[(loopback, False)])
    ca_path = directory / "ca.pem"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain = directory / "server.pem"
    chain.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + private_pem(key))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(chain)
    return ca_path, server
