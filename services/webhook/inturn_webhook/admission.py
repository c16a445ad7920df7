"""Which requests the webhook reads a body of, decided from their headers alone (``guard.GuardedProtocol`` asks).

The public port serves only the platform callbacks: a POST to a callback route whose signature header has that
route's form (``SIGNATURE_FORMS``: Meta's and inturn's ``sha256=`` and 64 hex digits, Twilio's Base64 of a
20-byte HMAC-SHA1) and a ``Content-Length`` within the body limit reserves that many bytes from the process's
``Budget`` and is read; a chunked body reserves the limit. Every other request carries no body: one that
announces a body is refused before it is read. The signature itself can only be checked once the body is in, so a
stranger who forges the form gets at most the budget's share, which is what the budget is for.
"""

from __future__ import annotations

from collections.abc import Mapping

from inturn_webhook.guard import Admit, Refusal
from inturn_webhook.signature import signature_form

BAD_SIGNATURE = Refusal(401, "missing or malformed signature header", "bad_signature")
NO_BODY_HERE = Refusal(413, "this request takes no body", "too_large")


def admission(routes: Mapping[bytes, bytes], generic_prefix: bytes, generic_header: bytes, max_body: int) -> Admit:
    """The admission rule of the webhook's routes: ``routes`` maps a callback path to its signature header's name
    (lower case), ``generic_prefix`` + one path segment is a callback route signed in ``generic_header``."""
    too_large = Refusal(413, f"body exceeds the {max_body}-byte limit", "too_large")
    forms = {path: (header, signature_form(header)) for path, header in routes.items()}
    generic = (generic_header, signature_form(generic_header))

    def admit(internal: bool, method: bytes, path: bytes, headers: list[tuple[bytes, bytes]]) -> int | Refusal:
        route = None
        if not internal and method == b"POST":
            route = forms.get(path)
            if route is None and path.startswith(generic_prefix):
                segment = path[len(generic_prefix) :]
                if segment and b"/" not in segment:
                    route = generic
        signed = route[0] if route is not None else None
        length: bytes | None = None
        chunked = False
        signature: bytes | None = None
        for name, value in headers:
            if name == b"content-length":
                if length is None:
                    length = value
            elif name == b"transfer-encoding":
                chunked = True
            elif name == signed and signature is None:
                signature = value
        if route is None:  # no body expected
            if chunked or (length is not None and length.strip() not in (b"", b"0")):
                return NO_BODY_HERE
            return 0
        if signature is None or route[1].fullmatch(signature.strip()) is None:
            return BAD_SIGNATURE
        if length is not None and length.isdigit():
            size = int(length)
            return too_large if size > max_body else size
        return max_body if chunked else 0

    return admit
