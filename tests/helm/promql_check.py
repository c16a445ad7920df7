"""Parses PromQL expressions given as a JSON list on stdin; prints a JSON list of the errors.

Runs in the chart tools' venv (it needs promql-parser, which the project itself does not).
"""

from __future__ import annotations

import json
import sys

import promql_parser  # type: ignore[import-not-found,unused-ignore]  # only where helm-check installed it


def errors(expressions: list[str]) -> list[str]:
    """One line per expression that does not parse."""
    found = []
    for expr in expressions:
        try:
            promql_parser.parse(expr)
        except ValueError as exc:
            found.append(f"{expr!r}: {exc}")
    return found


if __name__ == "__main__":
    print(json.dumps(errors(json.load(sys.stdin))))
