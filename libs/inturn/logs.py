"""structlog set up once per process: JSON when not on a terminal, context variables merged first.

Units of work (a message, a request) clear and re-bind their context with
``structlog.contextvars.bound_contextvars(room_id=..., partition=..., offset=..., message_id=...)``.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog


def configure(fmt: Literal["auto", "json", "console"] = "auto", level: str = "INFO") -> None:
    """Configure structlog and the standard library's root logger for this process."""
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    renderer: structlog.types.Processor
    if use_json:
        shared.append(structlog.processors.format_exc_info)
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level]),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
