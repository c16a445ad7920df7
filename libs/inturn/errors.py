"""inturn's exception tree: one root, a small tree under it.

A foreign library's error that crosses into inturn is re-raised as one of these with
``raise ... from exc``, so callers decide per type and never on strings.
"""

from __future__ import annotations

import sys
from typing import Any


class InturnError(Exception):
    """Root of every error inturn raises on purpose."""


class ConfigError(InturnError):
    """Settings are missing or invalid; the process must not start."""


class ReasonError(InturnError):
    """An error that says why in one line, ``reason``, which callers write into events, dead letters and logs."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SchemaError(ReasonError):
    """A record does not decode or validate; ``reason`` says why in one line."""

    def __init__(self, reason: str, *, raw: bytes | None = None) -> None:
        super().__init__(reason)
        self.raw = raw


class KafkaClientError(InturnError):
    """A librdkafka error, carrying its code (``confluent_kafka.KafkaError`` codes)."""

    def __init__(self, error: Any) -> None:  # a confluent_kafka.KafkaError
        super().__init__(str(error))
        self.error = error

    @property
    def code(self) -> int:
        """The librdkafka error code."""
        return int(self.error.code())

    @property
    def retriable(self) -> bool:
        """Whether librdkafka says the operation may succeed if tried again."""
        return bool(self.error.retriable())


class TopicMismatchError(InturnError):
    """The topics do not satisfy inturn's layout (e.g. messages and acks partition counts differ)."""


class TopicMissingError(InturnError):
    """A topic inturn needs does not exist."""


class PlatformError(ReasonError):
    """A send to a messaging platform failed; ``reason`` says why in one line."""

    def __init__(self, reason: str, *, status: int | None = None) -> None:
        super().__init__(reason)
        self.status = status


class TransientPlatformError(PlatformError):
    """Worth retrying: 429, 5xx, connection errors, send timeouts.

    ``retry_after`` (seconds) is the platform's own hint, honoured over the backoff when given.
    """

    def __init__(self, reason: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(reason, status=status)
        self.retry_after = retry_after


class PermanentPlatformError(PlatformError):
    """Retrying cannot help (4xx other than 429): the message is dead-lettered."""


#: Process exit code of inturn's commands (the CLI and the report job) for an error they end on; argparse's usage
#: errors keep their 2.
EXIT_ERROR = 1


def exit_status(program: str, exc: InturnError) -> int:
    """Say ``exc`` on stderr in one line as ``program``'s last words (``configuration error:`` before settings that
    are missing or invalid) and return ``EXIT_ERROR``."""
    words = " ".join(str(exc).split()) or type(exc).__name__
    kind = "configuration error: " if isinstance(exc, ConfigError) else ""
    print(f"{program}: {kind}{words}", file=sys.stderr)
    return EXIT_ERROR
