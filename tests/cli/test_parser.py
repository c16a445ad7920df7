"""The parser itself: help on every command and argument, shell completion generated from it, the webhook's help
listing every route it serves, and ``config check``'s output with secrets masked."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess

import pytest

from inturn_cli.main import build_parser, main
from inturn_webhook.app import PLATFORM_PATHS


def _walk(parser: argparse.ArgumentParser, path: str) -> list[str]:
    """Every command and argument under ``parser`` that has no help text, by its path."""
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, child in action.choices.items():
                if not helps.get(name):
                    missing.append(f"{path} {name}")
                missing += _walk(child, f"{path} {name}")
        elif not action.help or action.help == argparse.SUPPRESS:
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_command_and_argument_has_help() -> None:
    assert _walk(build_parser(), "inturn") == []


def test_the_walk_finds_an_argument_without_help() -> None:
    """The check above can fail: an argument added without help is reported by its path."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices["topics"].add_argument("--undocumented")
    assert _walk(parser, "inturn") == ["inturn topics --undocumented"]


def _complete(script: str, *words: str) -> list[str]:
    """What bash offers after ``words`` (the last one being completed), with ``script`` loaded."""
    line = " ".join(f"'{w}'" for w in words)
    program = f'{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _inturn; printf "%s\\n" "${{COMPREPLY[@]}}"'
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_bash_completion_offers_commands_actions_options_and_choices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert _complete(script, "inturn", "to") == ["topics"]
    assert _complete(script, "inturn", "topics", "") == ["create", "check"]
    assert _complete(script, "inturn", "topics", "check", "--") == ["--help", "--json"]
    assert _complete(script, "inturn", "dlq", "replay", "--y") == ["--yes"]
    assert _complete(script, "inturn", "produce", "--to", "") == ["kafka", "pubsub"]
    assert _complete(script, "inturn", "config", "check", "w") == ["worker", "webhook"]
    assert _complete(script, "inturn", "completion", "") == ["bash", "zsh"]
    assert _complete(script, "inturn", "--") == ["--help", "--version", "--traceback"]


def test_zsh_completion_loads_the_same_through_bashcompinit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "zsh"]) == 0
    script = capsys.readouterr().out
    assert script.startswith("#compdef inturn\n")
    assert "bashcompinit" in script
    assert "complete -o default -F _inturn inturn" in script


def test_webhook_help_lists_every_route_it_serves(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["webhook", "--help"])
    text = capsys.readouterr().out
    routes = [f"POST {path}" for path in PLATFORM_PATHS] + ["POST /webhooks/generic/{platform}"]
    routes += [f"GET  {p}" for p in ("/webhooks/whatsapp", "/webhooks/messenger", "/webhooks/instagram")]
    for route in routes:
        assert route in text
    assert {"whatsapp", "messenger", "instagram", "twilio"} <= set(PLATFORM_PATHS.values())
    assert "Telegram has no route" in text


def test_config_check_masks_secrets_and_says_where_each_value_came_from(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("INTURN_WEBHOOK_VERIFY_TOKEN", "verify-token-value-1")
    monkeypatch.setenv("INTURN_POSTGRES_DSN", "postgresql://inturn:dsn-password-2@db.example:5432/inturn")
    monkeypatch.setenv("INTURN_KAFKA_CLIENT_CONFIG", '{"sasl.password": "sasl-password-3", "security.protocol": "SSL"}')
    monkeypatch.setenv("INTURN_TOPIC_PARTITIONS", "24")
    assert main(["config", "check", "all", "--json"]) == 0
    text = capsys.readouterr().out
    for secret in ("verify-token-value-1", "dsn-password-2", "sasl-password-3"):
        assert secret not in text
    checked = json.loads(text)
    assert set(checked) == {"worker", "webhook", "bridge", "sim", "report", "operator"}
    webhook = checked["webhook"]["settings"]
    assert webhook["INTURN_WEBHOOK_VERIFY_TOKEN"] == {"value": "********", "source": "environment"}
    assert webhook["INTURN_TOPIC_PARTITIONS"] == {"value": 24, "source": "environment"}
    assert webhook["INTURN_KAFKA_CLIENT_CONFIG"]["value"] == {"sasl.password": "********", "security.protocol": "SSL"}
    assert webhook["INTURN_TOPIC_ACKS"] == {"value": "inturn.acks", "source": "default"}
    assert checked["worker"]["settings"]["INTURN_POSTGRES_DSN"]["value"] == (
        "postgresql://inturn:********@db.example:5432/inturn"
    )

    assert main(["config", "check", "webhook"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "# webhook"
    assert "INTURN_WEBHOOK_VERIFY_TOKEN=********" in lines
    assert "INTURN_TOPIC_ACKS=inturn.acks  # default" in lines


def test_config_check_exits_1_naming_the_invalid_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("INTURN_TOPIC_PARTITIONS", "0")
    assert main(["config", "check", "bridge", "--json"]) == 1
    captured = capsys.readouterr()
    checked = json.loads(captured.out)
    assert checked["bridge"]["ok"] is False
    assert "INTURN_TOPIC_PARTITIONS" in checked["bridge"]["error"]
    assert captured.err.splitlines() == [f"inturn: bridge: {checked['bridge']['error']}"]
