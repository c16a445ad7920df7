"""``inturn``: the one entry point. Each module in ``inturn_cli.commands`` adds its subcommands.

Every subcommand reads its settings from ``INTURN_*`` environment variables; flags override
them where a flag is offered. Exit codes: 0 done, 1 failed (bad arguments or configuration, a service out of
reach, a check that found problems), 130 interrupted. A failure is one line on stderr, never a traceback, except
for an unexpected error in a long-running service (worker, webhook, bridge, sim, dev, demo, report), whose
traceback is kept for its logs; ``--traceback`` shows it for any command.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

import inturn_cli.commands
from inturn import __version__
from inturn.errors import InturnError, exit_status

Handler = Callable[[argparse.Namespace], int]

#: Commands whose unexpected errors keep their traceback (long-running processes, whose logs want it).
SERVICES = frozenset({"worker", "webhook", "bridge", "sim", "dev", "demo", "report"})


class Parser(argparse.ArgumentParser):
    """argparse, except that a usage error is one line on stderr and exit code 1 (as every other failure)."""

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: error: <message> (see <prog> --help)`` and exit 1."""
        print(f"{self.prog}: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(1)


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every command module's subcommands."""
    parser = Parser(
        prog="inturn",
        description=(
            "inturn delivers each chat room's messages to messaging platforms in turn: message N+1 of a "
            "room is sent only after the platform acknowledged N (or N's ack timeout passed). "
            "Settings come from INTURN_* environment variables (see docs/configuration.md). "
            "Exit codes: 0 done, 1 failed (one line on stderr says why), 130 interrupted."
        ),
    )
    parser.add_argument("--version", action="version", version=f"inturn {__version__}", help="print the version")
    parser.add_argument(
        "--traceback", action="store_true", help="on an unexpected error, print the full traceback (for bug reports)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(inturn_cli.commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"inturn_cli.commands.{info.name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except InturnError as exc:
        return exit_status("inturn", exc)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if args.traceback or args.command in SERVICES:
            raise
        words = " ".join(str(exc).split())
        print(
            f"inturn: unexpected error: {type(exc).__name__}: {words} (run `inturn --traceback ...` for the details)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
