"""How the operator commands reach Kafka, PostgreSQL and Pub/Sub: within a bounded time, and when they cannot, one
line naming what was tried and what to check (``Unreachable``), never a traceback or librdkafka's own log lines.

Every wait is bounded by ``TIMEOUT_S``: a command that cannot reach a service says so within about that time (the
tests hold each to 15 s).
"""

from __future__ import annotations

import logging
import os
import socket
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any, TypeVar

import asyncpg
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from inturn.db.pool import connect_kwargs
from inturn.errors import InturnError, KafkaClientError
from inturn.kafka import base_config
from inturn.settings import KafkaSettings, PostgresSettings

#: The longest any single attempt to reach a service waits (connect, metadata, one request).
TIMEOUT_S = 5.0

T = TypeVar("T")


class Unreachable(InturnError):
    """A service did not answer, or refused: the message is the one line the command prints."""


def _quiet_logger() -> logging.Logger:
    """A logger that drops everything: librdkafka's own lines (connection refused, retrying...) are not for the
    terminal; the command reports the outcome in one line."""
    logger = logging.getLogger("inturn_cli.librdkafka")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return logger


def kafka_overrides() -> dict[str, Any]:
    """librdkafka settings of the CLI's clients: quiet, and giving up a connection attempt after ``TIMEOUT_S``."""
    return {"logger": _quiet_logger(), "socket.connection.setup.timeout.ms": int(TIMEOUT_S * 1000)}


def kafka_admin(settings: KafkaSettings) -> AdminClient:
    """An admin client (``inturn.kafka.base_config``) with ``kafka_overrides``."""
    return AdminClient({**base_config(settings), **kafka_overrides()})


def kafka_failure(settings: KafkaSettings, what: str, exc: BaseException) -> Unreachable:
    """The one line for a Kafka call that failed."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else getattr(exc, "error", exc)
    reason = error.str() if hasattr(error, "str") else str(error)
    return Unreachable(
        f"Kafka at {settings.kafka_bootstrap}: {what} failed ({reason}); check INTURN_KAFKA_BOOTSTRAP, that the "
        "brokers are up and reachable from here, and INTURN_KAFKA_CLIENT_CONFIG (security.protocol, sasl.*)"
    )


@contextmanager
def kafka(settings: KafkaSettings, what: str) -> Iterator[None]:
    """Turn a Kafka error inside the block into ``Unreachable`` naming ``what`` was being done."""
    try:
        yield
    except (KafkaException, KafkaClientError) as exc:
        raise kafka_failure(settings, what, exc) from exc


def refused(addresses: list[str]) -> str | None:
    """The reason, when every ``host:port`` refuses a TCP connection outright (nothing listens: no use waiting
    ``TIMEOUT_S`` for a client's retries); None when any accepts, or does not answer at once."""
    reasons = []
    for address in addresses:
        host, _, port = address.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=1.0):
                return None
        except (ConnectionRefusedError, socket.gaierror) as exc:
            reasons.append(f"{address}: {_reason(exc)}")
        except (OSError, ValueError):
            return None  # a timeout, or an address this check does not understand: the client decides
    return "; ".join(reasons) if reasons else None


def kafka_probe(settings: KafkaSettings, topic: str | None = None) -> None:
    """Raise ``Unreachable`` unless Kafka answers a metadata request within ``TIMEOUT_S`` (and ``topic`` exists)."""
    if reason := refused(settings.kafka_bootstrap.split(",")):
        raise Unreachable(
            f"Kafka at {settings.kafka_bootstrap}: no broker accepts a connection ({reason}); check "
            "INTURN_KAFKA_BOOTSTRAP and that the brokers are up and reachable from here"
        )
    admin = kafka_admin(settings)
    with kafka(settings, "reading the cluster's metadata"):
        meta = admin.list_topics(timeout=TIMEOUT_S)
    if topic is not None and topic not in meta.topics:
        raise Unreachable(
            f"Kafka at {settings.kafka_bootstrap} has no topic {topic}; create inturn's topics with "
            "`inturn topics create`, or check INTURN_TOPIC_MESSAGES"
        )


def postgres_target(settings: PostgresSettings) -> str:
    """host:port/database of the DSN, without user or password."""
    parts = urllib.parse.urlsplit(str(settings.postgres_dsn))
    host = parts.netloc.rsplit("@", 1)[-1]
    return f"{host}{parts.path}"


@asynccontextmanager
async def postgres(
    settings: PostgresSettings, command_timeout: float | None = TIMEOUT_S
) -> AsyncIterator[asyncpg.Connection]:
    """A connection (``TIMEOUT_S`` to connect, ``command_timeout`` per statement: None for none); a failure to
    connect, or a query that fails for the database's reasons, becomes ``Unreachable`` saying what to check."""
    target = postgres_target(settings)
    check = "check INTURN_POSTGRES_DSN, INTURN_POSTGRES_PASSWORD and that the server is up and reachable from here"
    try:
        conn = await asyncpg.connect(**connect_kwargs(settings), timeout=TIMEOUT_S, command_timeout=command_timeout)
    except (OSError, TimeoutError) as exc:
        raise Unreachable(f"PostgreSQL at {target}: cannot connect ({_reason(exc)}); {check}") from exc
    except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise Unreachable(f"PostgreSQL at {target} refused the connection ({_reason(exc)}); {check}") from exc
    try:
        yield conn
    except asyncpg.UndefinedTableError as exc:
        missing = f"PostgreSQL at {target} has no inturn tables ({_reason(exc)}); run `inturn migrate`"
        raise Unreachable(missing) from exc
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
        raise Unreachable(f"PostgreSQL at {target}: the query failed ({_reason(exc)}); {check}") from exc
    finally:
        try:
            await conn.close(timeout=TIMEOUT_S)
        except (OSError, TimeoutError, asyncpg.InterfaceError):
            conn.terminate()


def pubsub(where: str, call: Callable[[], T]) -> T:
    """Run a Pub/Sub call; a failure to reach or use Pub/Sub becomes ``Unreachable``."""
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    emulator = os.environ.get("PUBSUB_EMULATOR_HOST")
    target = f"the Pub/Sub emulator at {emulator}" if emulator else "Pub/Sub (pubsub.googleapis.com)"
    check = (
        "check PUBSUB_EMULATOR_HOST and that the emulator is up"
        if emulator
        else "check Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS), the project and the network"
    )
    if emulator and (reason := refused([emulator])):
        raise Unreachable(f"{target}: {where} failed (connection refused: {reason}); {check}")
    try:
        return call()
    except (gexc.GoogleAPIError, auth_exc.GoogleAuthError) as exc:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        raise Unreachable(f"{target}: {where} failed ({_one_line(str(message))}); {check}") from exc


def pubsub_probe(topic_path: str) -> None:
    """Raise ``Unreachable`` unless Pub/Sub answers a request about ``topic_path`` within ``TIMEOUT_S`` (the topic
    need not exist)."""
    from google.api_core import exceptions as gexc
    from google.cloud import pubsub_v1

    # The emulator is local: 3 s is plenty for it (and leaves room for the Pub/Sub client's import within the
    # 15 s the tests hold a failure to); Pub/Sub itself gets TIMEOUT_S (TLS and a token on the first call).
    timeout = 3.0 if os.environ.get("PUBSUB_EMULATOR_HOST") else TIMEOUT_S

    def ask() -> None:
        publisher = pubsub_v1.PublisherClient()
        with suppress(gexc.NotFound):  # the topic need not exist: Pub/Sub answered
            publisher.get_topic(request={"topic": topic_path}, timeout=timeout, retry=None)

    pubsub(f"reading topic {topic_path}", ask)


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return _one_line(text)


def _one_line(text: str) -> str:
    return " ".join(text.split())
