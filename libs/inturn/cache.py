"""Where inturn keeps artefacts it downloads once and reuses (Kafka's jars, the Spark report's jars)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$INTURN_CACHE_DIR``, else ``~/.cache/inturn``; created when missing."""
    root = os.environ.get("INTURN_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "inturn")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
