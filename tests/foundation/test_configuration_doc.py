"""docs/configuration.md is what the settings classes say, and names every setting."""

from __future__ import annotations

from pathlib import Path

from inturn_cli.reference import SECTIONS, _load, render

DOC = Path(__file__).parents[2] / "docs" / "configuration.md"


def test_the_configuration_reference_is_not_stale() -> None:
    assert DOC.read_text() == render(), "run `make docs` and commit docs/configuration.md"


def test_every_setting_of_every_service_is_documented() -> None:
    text = DOC.read_text()
    for _, path, _ in SECTIONS:
        cls = _load(path)
        assert cls is not None, path
        for name in cls.model_fields:
            assert f"`INTURN_{name.upper()}`" in text, (path, name)
