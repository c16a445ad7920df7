"""Prometheus metrics of inturn's services, one module per service, all names prefixed ``inturn_``.

Metric objects live here (not in the services) so that the Helm chart's alert rules and their
tests can read the exported names from one place.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

PREFIX = "inturn_"

__all__ = ["CONTENT_TYPE_LATEST", "PREFIX", "exposition"]


def exposition(registry: CollectorRegistry | None = None) -> bytes:
    """The text exposition of ``registry`` (the default one when None)."""
    from prometheus_client import REGISTRY

    return generate_latest(registry or REGISTRY)
