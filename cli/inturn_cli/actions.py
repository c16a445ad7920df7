"""A command made of actions (``inturn dlq list|replay``): the subparsers its actions go in."""

from __future__ import annotations

import argparse


def add_actions(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """The subparsers of command ``parser``'s actions: one action required, shown as ACTION in the usage."""
    return parser.add_subparsers(dest="action", required=True, metavar="ACTION")
