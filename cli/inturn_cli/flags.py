"""Command-line options that stand for settings."""

from __future__ import annotations

import argparse
from typing import Any


def given(args: argparse.Namespace, **settings: str) -> dict[str, Any]:
    """The options given on the command line as overrides of the settings they stand for: ``settings`` maps an
    option (its ``dest``) to its setting's field; an option left out (None) overrides nothing."""
    return {field: value for option, field in settings.items() if (value := getattr(args, option, None)) is not None}
