"""Reading a request body up to a limit, whether or not the client announced its length."""

from __future__ import annotations

from starlette.requests import Request

from inturn.errors import InturnError


class BodyTooLargeError(InturnError):
    """The body is (or announces itself as) larger than the limit."""


async def read_limited(request: Request, limit: int) -> bytes:
    """The whole body, or ``BodyTooLargeError`` as soon as it passes ``limit`` bytes.

    A ``Content-Length`` over the limit is refused before reading; a chunked body (no length) is
    read until it passes the limit and no further, so a client cannot make the process buffer more.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLargeError(f"Content-Length {declared} exceeds the {limit}-byte limit")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLargeError(f"body exceeds the {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)
