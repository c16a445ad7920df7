"""Settings every inturn process shares: environment variables with the one prefix ``INTURN_``.

Each service has its own ``Settings`` class (in this package) that extends these; ``load`` builds
one and turns validation errors into a ``ConfigError`` naming the environment variables at fault.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import Field, PostgresDsn, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from inturn.errors import ConfigError

ENV_PREFIX = "INTURN_"

#: Values that mark a secret as "not set yet"; refused outside development.
PLACEHOLDER_SECRETS = frozenset({"", "changeme", "change-me", "secret", "dev-secret", "placeholder"})


class InturnSettings(BaseSettings):
    """Base of every inturn settings class."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", case_sensitive=False)

    environment: Literal["development", "test", "production"] = Field(
        "development", description="Where this runs; placeholder secrets are refused in production."
    )
    log_format: Literal["auto", "json", "console"] = Field(
        "auto", description="Log rendering: JSON when not on a terminal if 'auto'."
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Lowest level logged.")

    @model_validator(mode="after")
    def _refuse_placeholder_secrets(self) -> InturnSettings:
        if self.environment != "production":
            return self
        for name, value in self:
            if isinstance(value, SecretStr) and value.get_secret_value().strip().lower() in PLACEHOLDER_SECRETS:
                raise ValueError(f"{ENV_PREFIX}{name.upper()} holds a placeholder secret; set a real one in production")
        return self


class KafkaSettings(InturnSettings):
    """Where Kafka is and how inturn's topics are named and shaped."""

    kafka_bootstrap: str = Field("127.0.0.1:9092", description="Kafka bootstrap servers, comma separated.")
    kafka_client_config: dict[str, str] = Field(
        default_factory=dict,
        description="Extra librdkafka settings as a JSON object (e.g. security.protocol, sasl.*).",
    )
    topic_messages: str = Field("inturn.messages", description="Topic of outbound messages, key = room_id.")
    topic_acks: str = Field("inturn.acks", description="Topic of platform acks, key = room_id.")
    topic_events: str = Field("inturn.events", description="Topic of delivery events (every outcome).")
    topic_dlq: str = Field("inturn.dlq", description="Dead-letter topic: records that could not be handled.")
    topic_partitions: int = Field(
        12, ge=1, description="Partitions of messages and acks (they must be equal) when inturn creates them."
    )
    topic_replication: int = Field(1, ge=1, description="Replication factor when inturn creates topics.")
    topic_retention_ms: int = Field(
        7 * 24 * 3600 * 1000, ge=-1, description="retention.ms of the topics inturn creates (-1: forever)."
    )


class PostgresSettings(InturnSettings):
    """Where PostgreSQL is."""

    postgres_dsn: PostgresDsn = Field(
        PostgresDsn("postgresql://inturn@127.0.0.1:5432/inturn"),
        description="PostgreSQL DSN; put the password in INTURN_POSTGRES_PASSWORD rather than here.",
    )
    postgres_password: SecretStr | None = Field(None, description="PostgreSQL password (overrides the DSN's).")
    postgres_pool_max: int = Field(4, ge=1, description="Connections per process.")


S = TypeVar("S", bound=BaseSettings)


def load(cls: type[S], **overrides: Any) -> S:
    """Build ``cls`` from the environment (plus ``overrides``), or raise ``ConfigError`` saying what is wrong."""
    try:
        return cls(**overrides)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "settings"
            env = f"{ENV_PREFIX}{field.split('.')[0].upper()}" if err["loc"] else "settings"
            problems.append(f"{env}: {err['msg']}")
        raise ConfigError(f"invalid {cls.__name__}: " + "; ".join(problems)) from exc
