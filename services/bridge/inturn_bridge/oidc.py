"""Verification of the OIDC token Pub/Sub attaches to push requests (``Authorization: Bearer <JWT>``).

Configured by ``INTURN_BRIDGE_OIDC_AUDIENCE`` (plus issuers, service-account email, certs URL).
The signature, expiry and audience are checked by ``google.oauth2.id_token.verify_token`` against
Google's signing certificates, which are fetched once and kept for ``CERTS_TTL_S`` (they rotate
daily, and fetching them per request would put Google's endpoint on every message's path).
Answers: no or malformed header, bad signature, expired, wrong audience, and a well-signed token of
another issuer or service account -> 401 (one answer for every token that does not prove the sender,
so a caller learns nothing about which check failed); certificates unreachable -> 503 (Pub/Sub retries).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from typing import Any

import google.auth.exceptions
import google.auth.transport
import google.auth.transport.requests
from google.oauth2 import id_token

from inturn.errors import InturnError
from inturn.settings.bridge import BridgeSettings

CERTS_TTL_S = 300.0


class TokenRejected(InturnError):
    """The push request may not be processed; ``status`` is the HTTP answer (401 or 503)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class _CachingRequest(google.auth.transport.Request):
    """An HTTP transport for google-auth that keeps successful GET answers for ``ttl`` seconds."""

    def __init__(self, ttl: float) -> None:
        self._inner = google.auth.transport.requests.Request()
        self._ttl = ttl
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, google.auth.transport.Response]] = {}

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> google.auth.transport.Response:
        if method == "GET":
            with self._lock:
                hit = self._cache.get(url)
            if hit is not None and time.monotonic() - hit[0] < self._ttl:
                return hit[1]
        response: google.auth.transport.Response = self._inner(
            url, method=method, body=body, headers=headers, timeout=timeout or 10, **kwargs
        )
        if method == "GET" and response.status == 200:
            with self._lock:
                self._cache[url] = (time.monotonic(), response)
        return response


class PushAuth:
    """Checks push requests' bearer tokens against the configured audience, issuers and email."""

    def __init__(self, settings: BridgeSettings) -> None:
        if settings.bridge_oidc_audience is None:
            raise ValueError("PushAuth needs INTURN_BRIDGE_OIDC_AUDIENCE")
        self._audience = settings.bridge_oidc_audience
        self._issuers = set(settings.bridge_oidc_issuers)
        self._email = settings.bridge_oidc_email
        self._certs_url = settings.bridge_oidc_certs_url
        self._transport = _CachingRequest(CERTS_TTL_S)

    async def verify(self, authorization: str | None) -> Mapping[str, Any]:
        """The token's claims, or ``TokenRejected`` with the status to answer."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise TokenRejected(401, "missing bearer token")
        # verify_token fetches certificates with a blocking HTTP client (only when the cache is cold).
        claims = await asyncio.to_thread(self._verify_sync, token.strip())
        if claims.get("iss") not in self._issuers:
            raise TokenRejected(401, f"token issuer {claims.get('iss')!r} is not accepted")
        if self._email is not None and (claims.get("email") != self._email or claims.get("email_verified") is not True):
            raise TokenRejected(401, f"token email {claims.get('email')!r} is not {self._email!r}, or not verified")
        return claims

    def _verify_sync(self, token: str) -> Mapping[str, Any]:
        try:
            return id_token.verify_token(
                token, self._transport, audience=self._audience, certs_url=self._certs_url, clock_skew_in_seconds=10
            )
        except google.auth.exceptions.TransportError as exc:
            raise TokenRejected(503, f"signing certificates unavailable: {exc}") from exc
        except ValueError as exc:  # google-auth's MalformedError, InvalidValue... all derive from ValueError
            raise TokenRejected(401, f"invalid token: {exc}") from exc
