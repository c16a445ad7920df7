"""inturn's PostgreSQL: the one home of its SQL. ``migrations`` define the tables, ``store`` is what the worker
reads and writes (epochs, cursors, dead letters, blocked rooms), ``operator`` what ``inturn rooms`` and ``inturn dlq``
read and change, ``pool`` how connections are made."""

from inturn.db.migrate import applied_versions, migrate

__all__ = ["applied_versions", "migrate"]
