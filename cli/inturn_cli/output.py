"""What commands print: text for people by default, one JSON document with ``--json`` (docs/cli.md lists each)."""

from __future__ import annotations

import argparse
import json
from typing import Any

JSON_HELP = "print one JSON document instead of text (its fields: docs/cli.md)"


def add_json(parser: argparse.ArgumentParser) -> None:
    """Add ``--json`` to a command that prints data."""
    parser.add_argument("--json", action="store_true", help=JSON_HELP)


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout (times and other values as their text)."""
    print(json.dumps(data, indent=2, default=str))
