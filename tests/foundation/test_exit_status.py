"""One mapping from inturn's errors to a command's exit code and last words, for the CLI and the report job."""

from __future__ import annotations

import pytest

from inturn.errors import ConfigError, InturnError, SchemaError, exit_status
from inturn_cli.main import main


def test_every_error_of_inturns_exits_1_in_one_line_naming_a_configuration_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert exit_status("inturn report", ConfigError("INTURN_REPORT_OUT_DIR is not set;\n  see docs")) == 1
    assert capsys.readouterr().err == "inturn report: configuration error: INTURN_REPORT_OUT_DIR is not set; see docs\n"
    assert exit_status("inturn", SchemaError("not JSON")) == 1
    assert capsys.readouterr().err == "inturn: not JSON\n"
    assert exit_status("inturn", InturnError("no such room")) == 1


def test_the_cli_ends_on_a_configuration_error_with_the_mapping(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("INTURN_ENVIRONMENT", "no-such-environment")
    assert main(["migrate"]) == 1  # the settings refuse the environment before anything connects
    assert capsys.readouterr().err.startswith("inturn: configuration error: ")
