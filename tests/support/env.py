"""Environment variables for one test."""

from __future__ import annotations

from collections.abc import Mapping

import pytest


def set_env(monkeypatch: pytest.MonkeyPatch, variables: Mapping[str, str]) -> None:
    """Set each of ``variables`` in the environment; ``monkeypatch`` restores the environment after the test."""
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
