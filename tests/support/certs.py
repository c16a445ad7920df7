"""Certificates made in a test: self-signed, or signed by a test's own authority."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import NameOID


def common_name(name: str) -> x509.Name:
    """An X.509 name made of a common name."""
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])


def certificate(
    subject: x509.Name,
    key: CertificateIssuerPrivateKeyTypes,
    *,
    issuer: tuple[x509.Name, CertificateIssuerPrivateKeyTypes] | None = None,
    extensions: Sequence[tuple[x509.ExtensionType, bool]] = (),
) -> x509.Certificate:
    """A certificate of ``key`` for ``subject``, valid from 5 minutes ago for an hour, signed by ``issuer`` (its name
    and key; self-signed without one), with ``extensions`` (each with whether it is critical)."""
    issuer_name, issuer_key = issuer or (subject, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical)
    return builder.sign(issuer_key, hashes.SHA256())


def private_pem(key: CertificateIssuerPrivateKeyTypes) -> bytes:
    """``key`` as unencrypted PKCS#8 PEM."""
    encoding, pkcs8 = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8
    return key.private_bytes(encoding, pkcs8, serialization.NoEncryption())
