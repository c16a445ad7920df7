"""Real local infrastructure for development, tests, the demo and benchmarks (no Docker needed).

Each launcher starts a real server on a free loopback port in a directory of its own, waits
until it answers, and stops it cleanly: ``LocalKafka`` (Apache Kafka in KRaft combined mode,
jars from Maven Central), ``LocalPostgres`` (Debian's PostgreSQL, ``initdb`` + ``pg_ctl``) and
``LocalPubSub`` (the gcloud Pub/Sub emulator).
"""

from inturn_devtools.kafka import KAFKA_VERSION, LocalKafka
from inturn_devtools.postgres import LocalPostgres
from inturn_devtools.pubsub import LocalPubSub

__all__ = ["KAFKA_VERSION", "LocalKafka", "LocalPostgres", "LocalPubSub"]
