"""Session-wide real infrastructure, and per-test topics and groups.

Each service is found through its environment variable when set (``INTURN_KAFKA_BOOTSTRAP``,
``INTURN_POSTGRES_DSN``, ``PUBSUB_EMULATOR_HOST``); otherwise through testcontainers when a
Docker engine answers; otherwise the project's local launchers start a real one for the session.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TypeVar

import asyncpg
import pytest
from confluent_kafka.admin import AdminClient

from inturn import topics
from inturn.kafka import make_admin
from inturn.settings import KafkaSettings
from inturn_devtools import LocalKafka, LocalPostgres, LocalPubSub

Server = TypeVar("Server", LocalKafka, LocalPostgres)


@pytest.fixture(scope="session", autouse=True)
def _logs_to_stderr() -> None:
    """Services log to stderr as in production, keeping stdout for what commands print."""
    from inturn.logs import configure

    configure("console", "INFO")


def _docker_answers() -> bool:
    if os.environ.get("INTURN_TESTS_NO_DOCKER"):
        return False
    try:
        import docker  # testcontainers' own dependency

        docker.from_env(timeout=2).ping()
    except Exception:
        return False
    return True


@pytest.fixture(scope="session")
def docker_available() -> bool:
    """Whether testcontainers can be used on this machine."""
    return _docker_answers()


def _own_server(variable: str, docker_available: bool, launcher: Callable[[], Server]) -> Iterator[Server | None]:
    """A server of the session's own (``launcher``'s, cleaned up afterwards) unless the environment variable
    ``variable`` names one or Docker answers (then None: testcontainers starts one)."""
    if os.environ.get(variable) or docker_available:
        yield None
        return
    with launcher() as server:
        yield server


@pytest.fixture(scope="session")
def kafka_broker(docker_available: bool) -> Iterator[LocalKafka | None]:
    """The session's own broker when none was given in the environment (None otherwise)."""
    yield from _own_server("INTURN_KAFKA_BOOTSTRAP", docker_available, LocalKafka)


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: LocalKafka | None, docker_available: bool) -> Iterator[str]:
    """Bootstrap address of a real Kafka broker."""
    if env := os.environ.get("INTURN_KAFKA_BOOTSTRAP"):
        yield env
    elif kafka_broker is not None:
        yield kafka_broker.bootstrap
    else:
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer("apache/kafka:4.1.1").with_kraft() as container:
            yield container.get_bootstrap_server()


@pytest.fixture(scope="session")
def postgres_server(docker_available: bool) -> Iterator[LocalPostgres | None]:
    """The session's own PostgreSQL when none was given in the environment (None otherwise)."""
    yield from _own_server("INTURN_POSTGRES_DSN", docker_available, LocalPostgres)


@pytest.fixture(scope="session")
def postgres_dsn(postgres_server: LocalPostgres | None) -> Iterator[str]:
    """DSN of a real PostgreSQL database."""
    if env := os.environ.get("INTURN_POSTGRES_DSN"):
        yield env
    elif postgres_server is not None:
        yield postgres_server.dsn
    else:
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16-alpine", driver=None) as container:
            yield container.get_connection_url()


@pytest.fixture
async def pg_schema(postgres_dsn: str) -> AsyncIterator[str]:
    """A DSN whose connections use a fresh schema of their own (search_path), dropped afterwards."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(postgres_dsn)
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        sep = "&" if "?" in postgres_dsn else "?"
        yield f"{postgres_dsn}{sep}options=-csearch_path%3D{schema}"
        await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def pubsub_host() -> Iterator[str]:
    """``host:port`` of a Pub/Sub emulator; also exported as PUBSUB_EMULATOR_HOST for the clients."""
    if env := os.environ.get("PUBSUB_EMULATOR_HOST"):
        yield env
        return
    emulator = LocalPubSub().start()
    os.environ["PUBSUB_EMULATOR_HOST"] = emulator.host
    try:
        yield emulator.host
    finally:
        os.environ.pop("PUBSUB_EMULATOR_HOST", None)
        emulator.cleanup()


@pytest.fixture
def test_id() -> str:
    """A short id unique to this test, for topic, group and schema names."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def kafka_settings(kafka_bootstrap: str, test_id: str) -> KafkaSettings:
    """Settings naming topics of this test's own (not yet created)."""
    return KafkaSettings(
        kafka_bootstrap=kafka_bootstrap,
        topic_partitions=4,
        **topics.prefixed(f"t{test_id}"),
    )


@pytest.fixture
def kafka_admin(kafka_settings: KafkaSettings) -> AdminClient:
    """An admin client for the session's broker."""
    return make_admin(kafka_settings)


@pytest.fixture
def inturn_topics(kafka_settings: KafkaSettings, kafka_admin: AdminClient) -> KafkaSettings:
    """This test's four topics, created; returns the settings naming them."""
    topics.create(kafka_admin, kafka_settings)
    return kafka_settings
