"""``inturn``: the one entry point. Each module in ``inturn_cli.commands`` adds its subcommands.

Every subcommand reads its settings from ``INTURN_*`` environment variables; flags override
them where a flag is offered. Exit codes: 0 done, 1 failed at run time, 2 bad usage or config.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Callable, Sequence

import inturn_cli.commands
from inturn import __version__
from inturn.errors import InturnError, exit_status

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every command module's subcommands."""
    parser = argparse.ArgumentParser(
        prog="inturn",
        description=(
            "inturn delivers each chat room's messages to messaging platforms in turn: message N+1 of a "
            "room is sent only after the platform acknowledged N (or N's ack timeout passed). "
            "Settings come from INTURN_* environment variables (see docs/configuration.md)."
        ),
    )
    parser.add_argument("--version", action="version", version=f"inturn {__version__}")
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


if __name__ == "__main__":
    sys.exit(main())
