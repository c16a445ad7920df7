"""``inturn config reference|check``: the configuration reference, and a component's effective settings."""

from __future__ import annotations

import argparse
import importlib
import sys
import urllib.parse
from typing import Any

from pydantic import SecretStr
from pydantic_settings import BaseSettings

from inturn.errors import ConfigError
from inturn.settings.common import ENV_PREFIX, load
from inturn_cli.actions import add_actions
from inturn_cli.output import add_json, print_json
from inturn_cli.reference import render

#: Component -> its settings class ("module:Class"), as each process loads it.
COMPONENTS: dict[str, str] = {
    "worker": "inturn.settings.worker:WorkerSettings",
    "webhook": "inturn.settings.webhook:WebhookSettings",
    "bridge": "inturn.settings.bridge:BridgeSettings",
    "sim": "inturn.settings.sim:SimSettings",
    "report": "inturn_reports.settings:ReportSettings",
    "operator": "inturn.settings.operator:OperatorSettings",
}

#: What a masked secret prints as.
MASK = "********"
#: Keys of INTURN_KAFKA_CLIENT_CONFIG (librdkafka settings) whose values are secret.
_SECRET_KEY_PARTS = ("password", "secret", "token", "pem", "credential")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``config``."""
    parser = sub.add_parser(
        "config",
        help="configuration reference and check",
        description="Print every INTURN_* setting with its default and meaning (Markdown), or check a component's "
        "settings as it would load them from this environment.",
    )
    actions = add_actions(parser)
    actions.add_parser("reference", help="print docs/configuration.md").set_defaults(handler=_reference)
    check = actions.add_parser(
        "check",
        help="print a component's effective settings (secrets masked); exit 1 when they are invalid",
        description="Load the settings of COMPONENT from this environment exactly as the process would and print "
        "every one with its value (secrets, passwords in URLs and secret librdkafka settings masked) and whether it "
        "came from the environment or is the default. Exit 1, with the problem, when the process would refuse to "
        "start.",
    )
    check.add_argument(
        "component",
        metavar="COMPONENT",
        choices=[*COMPONENTS, "all"],
        help=f"whose settings: {', '.join(COMPONENTS)} or all",
    )
    add_json(check)
    check.set_defaults(handler=_check)


def _reference(args: argparse.Namespace) -> int:
    print(render(), end="")
    return 0


def settings_class(component: str) -> type[BaseSettings]:
    """The settings class of ``component``."""
    module, _, name = COMPONENTS[component].partition(":")
    cls: type[BaseSettings] = getattr(importlib.import_module(module), name)
    return cls


def masked(value: Any) -> Any:
    """``value`` as it may be printed: secrets replaced by ``MASK``, URL passwords and secret mapping values too."""
    if isinstance(value, SecretStr):
        return MASK if value.get_secret_value() else ""
    if isinstance(value, dict):
        return {
            k: (MASK if any(p in str(k).lower() for p in _SECRET_KEY_PARTS) else masked(v)) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [masked(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return _url_masked(value) if isinstance(value, str) else value
    return _url_masked(str(value))  # URLs, DSNs, paths: their text


def _url_masked(text: str) -> str:
    if "://" not in text or "@" not in text:
        return text
    parts = urllib.parse.urlsplit(text)
    if parts.password is None:
        return text
    userinfo, _, host = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}"))


def effective(component: str) -> dict[str, Any]:
    """``{"ok": True, "settings": {VAR: {"value", "source"}}}`` or ``{"ok": False, "error": ...}``."""
    try:
        settings = load(settings_class(component))
    except ConfigError as exc:
        return {"ok": False, "error": " ".join(str(exc).split())}
    from_env = settings.model_fields_set
    values = {
        f"{ENV_PREFIX}{name.upper()}": {
            "value": masked(getattr(settings, name)),
            "source": "environment" if name in from_env else "default",
        }
        for name in type(settings).model_fields
    }
    return {"ok": True, "settings": values}


def _check(args: argparse.Namespace) -> int:
    names = list(COMPONENTS) if args.component == "all" else [args.component]
    results = {name: effective(name) for name in names}
    if args.json:
        print_json(results)
    else:
        for name, result in results.items():
            if not result["ok"]:
                continue
            print(f"# {name}")
            for var, item in result["settings"].items():
                value = item["value"]
                shown = value if isinstance(value, str) else "" if value is None else _json(value)
                note = "" if item["source"] == "environment" else "  # default" + (", unset" if value is None else "")
                print(f"{var}={shown}{note}")
    failed = [name for name, result in results.items() if not result["ok"]]
    for name in failed:
        print(f"inturn: {name}: {results[name]['error']}", file=sys.stderr)
    return 1 if failed else 0


def _json(value: Any) -> str:
    import json

    return json.dumps(value)
