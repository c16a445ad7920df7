"""Settings of inturn's processes (environment variables, prefix ``INTURN_``)."""

from inturn.settings.common import ENV_PREFIX, InturnSettings, KafkaSettings, PostgresSettings, load

__all__ = ["ENV_PREFIX", "InturnSettings", "KafkaSettings", "PostgresSettings", "load"]
