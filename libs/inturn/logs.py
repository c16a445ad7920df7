"""structlog set up once per process: JSON when not on a terminal, context variables merged first.

A unit of work done once per message (a send, an ack routed) names itself with ``bind_work(room_id=...,
partition=..., offset=..., message_id=...)``, which replaces the previous unit's names in the current context;
what is logged meanwhile carries them. Other units (a request) use structlog's own
``structlog.contextvars.bound_contextvars``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, MutableMapping
from contextvars import ContextVar
from typing import Any, Literal

import structlog

_NOTHING: Mapping[str, object] = {}
_WORK: ContextVar[Mapping[str, object]] = ContextVar("inturn_work", default=_NOTHING)


def bind_work(**names: object) -> None:
    """Name the unit of work what this context logs next is about, in place of the previous unit's names.

    One context variable set per unit: structlog's ``bind_contextvars`` sets one per key, which on the worker's
    per-message paths (a send, an ack) cost about 5% of its CPU (py-spy, worker benchmark load).
    """
    _WORK.set(names)


def clear_work() -> None:
    """This context works on no unit any more."""
    _WORK.set(_NOTHING)


def work() -> Mapping[str, object]:
    """The names ``bind_work`` gave this context's current unit (empty: none)."""
    return _WORK.get()


def merge_work(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: the current unit's names, under the event's own keys."""
    names = _WORK.get()
    if not names:
        return event_dict
    merged: MutableMapping[str, Any] = {**names}
    merged.update(event_dict)
    return merged


def configure(fmt: Literal["auto", "json", "console"] = "auto", level: str = "INFO") -> None:
    """Configure structlog and the standard library's root logger for this process."""
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        merge_work,
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
