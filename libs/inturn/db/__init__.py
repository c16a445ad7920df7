"""PostgreSQL access shared by the services: connection pools and schema migrations."""

from inturn.db.migrate import applied_versions, migrate

__all__ = ["applied_versions", "migrate"]
