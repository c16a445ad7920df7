"""Settings of the operator commands (``inturn rooms``, ``inturn dlq``): Kafka and PostgreSQL, and the token of the
workers' room API."""

from __future__ import annotations

from pydantic import Field, SecretStr

from inturn.settings.common import KafkaSettings, PostgresSettings


class OperatorSettings(KafkaSettings, PostgresSettings):
    """Kafka and PostgreSQL, as the operator commands need both."""

    worker_room_api_token: SecretStr | None = Field(
        None,
        description="The workers' room API token (the worker's own setting): `inturn rooms show --worker` sends it "
        "as `Authorization: Bearer`.",
    )
