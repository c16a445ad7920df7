"""Settings of the operator commands (``inturn rooms``, ``inturn dlq``): Kafka and PostgreSQL, nothing of their own."""

from __future__ import annotations

from inturn.settings.common import KafkaSettings, PostgresSettings


class OperatorSettings(KafkaSettings, PostgresSettings):
    """Kafka and PostgreSQL, as the operator commands need both."""
