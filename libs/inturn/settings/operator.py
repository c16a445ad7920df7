"""Settings of the operator commands (``inturn rooms``, ``inturn dlq``): Kafka and PostgreSQL, and the token of the
workers' room API."""

from __future__ import annotations

from pydantic import Field, SecretStr

from inturn.settings.common import KafkaSettings, PostgresSettings


class OperatorSettings(KafkaSettings, PostgresSettings):
    """Kafka and PostgreSQL, as the operator commands need both, and what ``inturn rooms show`` sends a worker."""

    worker_room_api_token: SecretStr | None = Field(
        None, description="Bearer token `inturn rooms show` sends to the workers' /rooms/{room_id} (the worker's own)."
    )
