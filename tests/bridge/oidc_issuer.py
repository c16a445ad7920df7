"""A stand-in for Google as the issuer of Pub/Sub push tokens: an RSA key made here, its certificate served on
loopback the way Google serves its own (JSON ``{kid: PEM}``), and ID tokens signed with it.

A token signed by Google cannot be made offline; with ``INTURN_BRIDGE_OIDC_CERTS_URL`` pointing at this server,
everything the bridge checks (signature, expiry, audience, issuer, email) is checked for real.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth import crypt, jwt

from tests.support.certs import certificate, common_name, private_pem

AUDIENCE = "https://bridge.example.com/push"
PUSHER = "pusher@inturn-test.iam.gserviceaccount.com"


def signing_key(kid: str) -> tuple[crypt.RSASigner, str]:
    """A fresh RSA signer and its self-signed certificate (PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = certificate(common_name("inturn-test"), key)
    signer = crypt.RSASigner.from_string(private_pem(key), key_id=kid)  # type: ignore[no-untyped-call]  # google-auth is untyped here
    return signer, cert.public_bytes(serialization.Encoding.PEM).decode()


def token(signer: crypt.RSASigner, **claims: Any) -> str:
    """A signed JWT with the claims of a push token for ``AUDIENCE`` from ``PUSHER``, overridden by ``claims``."""
    now = int(time.time())
    payload = {
        "iss": "https://accounts.google.com",
        "aud": AUDIENCE,
        "iat": now,
        "exp": now + 600,
        "email": PUSHER,
        "email_verified": True,
        **claims,
    }
    encoded: bytes = jwt.encode(signer, payload)  # type: ignore[no-untyped-call]  # google-auth is untyped here
    return encoded.decode()


@contextlib.asynccontextmanager
async def certificate_server() -> AsyncIterator[tuple[str, crypt.RSASigner]]:
    """Serve a fresh key's certificate on loopback; yields its URL (for ``bridge_oidc_certs_url``) and the signer."""
    signer, cert = signing_key("kid-1")

    async def certs(_: web.Request) -> web.Response:
        return web.json_response({"kid-1": cert})

    app = web.Application()
    app.router.add_get("/oauth2/v1/certs", certs)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/oauth2/v1/certs", signer
    finally:
        await runner.cleanup()
