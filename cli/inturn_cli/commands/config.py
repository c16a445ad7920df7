"""``inturn config reference``: print the configuration reference (docs/configuration.md)."""

from __future__ import annotations

import argparse

from inturn_cli.reference import render


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``config``."""
    parser = sub.add_parser(
        "config",
        help="configuration reference",
        description="Print every INTURN_* setting with its default and meaning (Markdown).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("reference", help="print docs/configuration.md").set_defaults(handler=_reference)


def _reference(args: argparse.Namespace) -> int:
    print(render(), end="")
    return 0
