"""Request signatures: ``sha256=<hex>`` HMAC-SHA256 of the raw body, checked in constant time.

Meta signs with the app secret in ``X-Hub-Signature-256``; inturn's generic endpoint uses the
same scheme in ``X-Inturn-Signature-256``. Several secrets may be accepted at once (rotation).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

from inturn.errors import InturnError

_PREFIX = "sha256="
_DIGEST_SIZE = 32  # SHA-256


class SignatureError(InturnError):
    """The signature header is missing, malformed or matches none of the accepted secrets."""


def sign(body: bytes, secret: bytes) -> str:
    """The header value a sender puts on ``body``: ``sha256=<hex digest>``."""
    return _PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(header: str | None, body: bytes, secrets: Sequence[bytes]) -> None:
    """Return if ``header`` signs ``body`` with one of ``secrets``; raise ``SignatureError`` otherwise."""
    if header is None:
        raise SignatureError("missing signature header")
    if not header.startswith(_PREFIX):
        raise SignatureError("malformed signature header (expected sha256=<hex>)")
    given = header[len(_PREFIX) :].strip()
    try:
        given_bytes = bytes.fromhex(given) if len(given) == 2 * _DIGEST_SIZE else b""
    except ValueError:  # not hex
        given_bytes = b""
    if len(given_bytes) != _DIGEST_SIZE:  # also 64 characters with whitespace among them, which fromhex skips
        raise SignatureError("malformed signature header (expected 64 hex digits)")
    # Every secret is tried (no early exit) so timing does not tell which one matched.
    matched = False
    for secret in secrets:
        expected = hmac.digest(secret, body, "sha256")  # one-shot: OpenSSL without an HMAC object
        matched |= hmac.compare_digest(expected, given_bytes)
    if not matched:
        raise SignatureError("signature does not match")
