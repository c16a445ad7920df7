"""inturn's shared library: schemas, settings, Kafka clients, topics, logging, metrics, platform adapters."""

__version__ = "0.1.0"
