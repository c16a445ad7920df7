"""Settings every inturn process shares: environment variables with the one prefix ``INTURN_``.

Each service has its own ``Settings`` class (in this package) that extends these; ``load`` builds
one and turns validation errors into a ``ConfigError`` naming the environment variables at fault.

Two rules hold for every class, so no service runs on a setting it misread:

- an ``INTURN_*`` environment variable that no inturn component knows stops the process, naming the
  closest known one (a misspelt ``INTURN_WORKER_ACK_TIMOUT_MS`` would otherwise leave the default in
  force without a word). A variable of a sibling component is fine: one env file may serve them all;
- in production, a credential holding a placeholder (``PLACEHOLDER_SECRETS``) stops the process.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import Field, PostgresDsn, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from inturn import schemas
from inturn.errors import ConfigError

ENV_PREFIX = "INTURN_"

#: Values that mark a secret as "not set yet" (compared trimmed and lower-cased); refused in production.
#: ``dev-secret`` and ``dev-token`` are the development defaults, matching the platform simulator's.
PLACEHOLDER_SECRETS = frozenset(
    {
        "",
        "changeme",
        "change-me",
        "change_me",
        "secret",
        "dev-secret",
        "dev-token",
        "token",
        "password",
        "placeholder",
        "example",
        "todo",
    }
)

#: The settings class of every inturn component in this package ("module:Class"). Their fields, with
#: ``OUTSIDE_FIELDS`` and ``OTHER_VARIABLES``, are every ``INTURN_*`` variable any component reads.
SETTINGS_CLASSES: tuple[str, ...] = (
    "inturn.settings.worker:WorkerSettings",
    "inturn.settings.webhook:WebhookSettings",
    "inturn.settings.bridge:BridgeSettings",
    "inturn.settings.sim:SimSettings",
    "inturn.settings.operator:OperatorSettings",
)

#: Fields of settings classes that live outside libs (which imports none of them): the report's, with the
#: Spark job. tests/security/test_settings_strict.py keeps this equal to the class.
OUTSIDE_FIELDS: Mapping[str, frozenset[str]] = {
    "inturn_reports.settings:ReportSettings": frozenset(
        {
            "report_cleanup_grace_s",
            "report_driver_memory",
            "report_gcs_anonymous",
            "report_gcs_endpoint",
            "report_grace_ms",
            "report_input_dir",
            "report_jdbc_password",
            "report_jdbc_url",
            "report_jdbc_user",
            "report_keep_days",
            "report_master",
            "report_nights",
            "report_out_dir",
            "report_s3_endpoint",
            "report_s3_path_style",
            "report_s3_region",
            "report_shuffle_partitions",
            "report_source",
            "report_timeline_bucket_s",
            "report_top_n",
        }
    ),
}

#: ``INTURN_*`` variables read outside the settings classes, and by whom.
OTHER_VARIABLES: Mapping[str, str] = {
    "INTURN_CACHE_DIR": "where downloaded jars and tools are kept (libs/inturn/cache.py, the image)",
    "INTURN_STATE_DIR": "where `inturn dev` keeps its state file",
    "INTURN_WORKER_PROFILE": "development aid: the worker writes cProfile stats to this file on exit",
    "INTURN_BENCH_COMMIT": "the commit a benchmark run measured, outside git",
    "INTURN_TESTS_NO_DOCKER": "the tests start Kafka, PostgreSQL and the emulator without Docker",
    "INTURN_TEST_SPARK_JARS": "0: the report's tests start Spark without the Kafka and JDBC jars (make test-compat)",
    "INTURN_LOAD_TESTS": "the tests also run the webhook's 30-second load test (tests/security/test_webhook_load.py)",
    "INTURN_REPORT_CHANGED_SINCE": "a commit: scripts/report-changed.sh decides from that range whether CI runs "
    "make test-compat",
}


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
    test_clock_offset_ms: int = Field(
        0,
        description="Tests only: milliseconds added to this process's wall clock (negative: behind), to run one "
        "service's clock apart from the others'. A production service refuses to start with it set.",
    )

    #: Credentials that may be left unset in production (at their development default): each stands for a feature
    #: a deployment may not use, and the class itself decides what unset means (see PlatformSettings). A value
    #: *given* as a placeholder is refused all the same.
    unset_allowed_in_production: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _refuse_unknown_variables(cls, data: Any) -> Any:
        problems = unknown_variables(os.environ)
        if problems:
            raise ValueError("; ".join(problems))
        return data

    @model_validator(mode="after")
    def _refuse_test_clock_in_production(self) -> InturnSettings:
        if self.environment == "production" and "test_clock_offset_ms" in self.model_fields_set:
            raise ValueError(f"{ENV_PREFIX}TEST_CLOCK_OFFSET_MS: a test clock; not allowed in production (unset it)")
        return self

    @model_validator(mode="after")
    def _refuse_placeholder_secrets(self) -> InturnSettings:
        if self.environment != "production":
            return self
        names = [f"{ENV_PREFIX}{name.upper()}" for name in placeholder_secrets(self)]
        if names:
            raise ValueError(f"{', '.join(names)}: placeholder secret; set a real one in production")
        return self


class KafkaSettings(InturnSettings):
    """Where Kafka is and how inturn's topics are named and shaped."""

    kafka_bootstrap: str = Field("127.0.0.1:9092", description="Kafka bootstrap servers, comma separated.")
    kafka_client_config: dict[str, str] = Field(
        default_factory=dict,
        description="Extra librdkafka settings as a JSON object (e.g. security.protocol, sasl.*).",
    )
    kafka_compression: Literal["none", "lz4", "zstd", "snappy", "gzip"] = Field(
        "lz4", description="compression.type of inturn's producers (the broker keeps each batch as produced)."
    )
    kafka_linger_ms: int = Field(
        25,
        ge=0,
        le=1000,
        description="linger.ms of inturn's message producers (the bridge, the SDK's MessageProducer, `inturn produce`, "
        "dead-letter replays): the most a message waits for others to share its produce request. librdkafka sends "
        "one produce request per partition, and the broker's cost is mostly per request (docs/operations.md, "
        "Sizing). The webhook's and the worker's producers have their own.",
    )
    topic_messages: str = Field("inturn.messages", description="Topic of outbound messages, key = room_id.")
    topic_acks: str = Field("inturn.acks", description="Topic of platform acks, key = room_id.")
    topic_events: str = Field("inturn.events", description="Topic of delivery events (every outcome).")
    topic_dlq: str = Field("inturn.dlq", description="Dead-letter topic: records that could not be handled.")
    topic_statuses: str = Field(
        "inturn.statuses",
        description="Topic of platform statuses that can no longer change a message's outcome (a later status of a "
        "message whose deciding one went to the acks topic), key = room_id: the nightly report reads it with the "
        "acks topic, the workers never do (docs/webhook.md, Statuses off the workers' path).",
    )
    topic_partitions: int = Field(
        12, ge=1, description="Partitions of messages and acks (they must be equal) when inturn creates them."
    )
    topic_events_partitions: int = Field(
        0,
        ge=0,
        description="Partitions of the events topic when inturn creates it (0: as INTURN_TOPIC_PARTITIONS). Fewer "
        "mean fewer produce requests at low rates; a new owner of a messages partition reads the events partition "
        "it maps to (its number modulo this count) over the acks look-back before its first send "
        "(docs/operations.md, Sizing).",
    )
    topic_statuses_partitions: int = Field(
        0,
        ge=0,
        description="Partitions of the statuses topic when inturn creates it (0: as INTURN_TOPIC_PARTITIONS); only "
        "the nightly report reads it.",
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


def is_placeholder(secret: SecretStr) -> bool:
    """Whether ``secret`` is one of ``PLACEHOLDER_SECRETS`` (trimmed, any case)."""
    return secret.get_secret_value().strip().lower() in PLACEHOLDER_SECRETS


def placeholder_secrets(settings: BaseSettings) -> list[str]:
    """Names of the fields of ``settings`` holding a placeholder credential: a ``SecretStr``, or any secret of a
    list of them (secret lists for rotation). An unset optional secret (None) is not one: the feature is off; nor
    is a field of ``unset_allowed_in_production`` left at its default."""
    optional: frozenset[str] = getattr(settings, "unset_allowed_in_production", frozenset())
    found = []
    for name, value in settings:
        if name in optional and name not in settings.model_fields_set:
            continue
        secrets: Iterable[object] = value if isinstance(value, list) else [value]
        if any(isinstance(secret, SecretStr) and is_placeholder(secret) for secret in secrets):
            found.append(name)
    return found


def _class(path: str) -> type[BaseSettings]:
    module, _, name = path.partition(":")
    cls: type[BaseSettings] = getattr(importlib.import_module(module), name)
    return cls


@functools.cache
def known_variables() -> frozenset[str]:
    """Every ``INTURN_*`` variable some inturn component reads (upper case)."""
    fields: set[str] = set()
    for path in SETTINGS_CLASSES:
        fields |= set(_class(path).model_fields)
    for outside in OUTSIDE_FIELDS.values():
        fields |= outside
    return frozenset({f"{ENV_PREFIX}{name.upper()}" for name in fields} | set(OTHER_VARIABLES))


#: The variables Kubernetes sets for every Service of the namespace (service links): a release named ``inturn``
#: has Services ``inturn-webhook``... whose links read ``INTURN_WEBHOOK_SERVICE_HOST``, ``INTURN_WEBHOOK_PORT``
#: (``tcp://10.0.0.7:8080``), ``INTURN_WEBHOOK_PORT_8080_TCP_ADDR``... They are not settings and not typos.
_SERVICE_LINK = re.compile(
    r"^[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)$"
)
_SERVICE_LINK_URL = re.compile(r"^(tcp|udp|sctp)://[^/]+:\d+$")


def _is_service_link(name: str, value: str) -> bool:
    return bool(_SERVICE_LINK.match(name)) or (name.endswith("_PORT") and bool(_SERVICE_LINK_URL.match(value)))


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """One message per ``INTURN_*`` name in ``environ`` that no component knows, naming the closest known one
    (Kubernetes' service-link variables excepted)."""
    known = known_variables()
    suffixes = [name.removeprefix(ENV_PREFIX) for name in known]  # the shared prefix would make everything "close"
    problems = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in known or _is_service_link(upper, environ[name]):
            continue
        close = difflib.get_close_matches(upper.removeprefix(ENV_PREFIX), suffixes, n=1, cutoff=0.6)
        hint = f"did you mean {ENV_PREFIX}{close[0]}?" if close else "see docs/configuration.md for the known ones"
        problems.append(f"{name} is not a setting of any inturn component ({hint})")
    return problems


S = TypeVar("S", bound=BaseSettings)


def load(cls: type[S], **overrides: Any) -> S:
    """Build ``cls`` from the environment (plus ``overrides``), or raise ``ConfigError`` saying what is wrong.

    A test clock offset given (``INTURN_TEST_CLOCK_OFFSET_MS``, never in production) is applied to the process's
    wall clock (``inturn.schemas.now_ms``) here, before the service reads the time."""
    try:
        settings = cls(**overrides)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            if not err["loc"]:  # a check across fields (a model validator) names its variables itself
                problems.append(str(err["msg"]).removeprefix("Value error, "))
                continue
            problems.append(f"{ENV_PREFIX}{str(err['loc'][0]).upper()}: {err['msg']}")
        raise ConfigError(f"invalid {cls.__name__}: " + "; ".join(problems)) from exc
    if "test_clock_offset_ms" in settings.model_fields_set:
        schemas.set_test_clock_offset(int(getattr(settings, "test_clock_offset_ms", 0)))
    return settings
