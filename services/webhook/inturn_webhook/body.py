"""Reading a request body from ASGI ``receive`` up to a limit, whether or not the client announced its length."""

from __future__ import annotations

from starlette.types import Message, Receive

from inturn.errors import InturnError


class BodyTooLargeError(InturnError):
    """The body is (or announces itself as) larger than the limit."""


class ClientGoneError(InturnError):
    """The client disconnected before it had sent the whole body: there is nobody left to answer."""


async def read_limited(receive: Receive, declared: bytes | None, limit: int, first: Message | None = None) -> bytes:
    """The whole body, or ``BodyTooLargeError`` as soon as it passes ``limit`` bytes.

    ``declared`` is the ``Content-Length`` header's value, if any: over the limit, the body is refused
    before reading; a chunked body (no length) is read until it passes the limit and no further, so a
    client cannot make the process buffer more. ``ClientGoneError`` if the client disconnects first.
    ``first``: the first ASGI message, when the caller received it already.
    """
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLargeError(f"Content-Length {declared.decode()} exceeds the {limit}-byte limit")
    message = first if first is not None else await receive()
    if message["type"] != "http.request":
        raise ClientGoneError("client disconnected")
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):  # the usual case: the whole body in one message
        if len(body) > limit:
            raise BodyTooLargeError(f"body exceeds the {limit}-byte limit")
        return body
    chunks = [body]
    size = len(body)
    while True:
        if size > limit:
            raise BodyTooLargeError(f"body exceeds the {limit}-byte limit")
        if not message.get("more_body", False):
            return b"".join(chunks)
        message = await receive()
        if message["type"] != "http.request":
            raise ClientGoneError("client disconnected")
        chunk = message.get("body", b"")
        size += len(chunk)
        chunks.append(chunk)
