"""The Helm chart's `config` maps in values.schema.json, generated from the settings classes.

Each `config` map of the chart (``config``, ``worker.config``, ``webhook.config``, ``bridge.config``,
``report.config``) becomes an object whose properties are the fields of the settings class that component reads, so
helm's schema check refuses a wrong type or a value outside an enum. Unknown keys pass the schema: the chart's own
check (templates/_helpers.tpl, ``inturn.validateConfigKeys``) refuses them against files/settings.json, written here
too, naming the closest known key (``worker_ack_timout_ms`` ... did you mean ``worker_ack_timeout_ms``?), which
helm's schema error cannot. It fails ``helm install``, ``helm template`` and ``helm lint`` alike. Secrets
(``SecretStr`` fields) are left out: they come from ``secrets.items``, never from a ConfigMap. The fields the chart
sets itself (ports, the topic layout, the bridge's mode) stay in, so that the chart's own check
(templates/_helpers.tpl, ``inturn.validate``) can say which value sets them.

    python -m inturn_devtools.chart_schema          # rewrite values.schema.json and files/settings.json
    python -m inturn_devtools.chart_schema --check  # exit 1 when either committed file differs (what CI runs)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings

from inturn.settings import KafkaSettings
from inturn.settings.bridge import BridgeSettings
from inturn.settings.webhook import WebhookSettings
from inturn.settings.worker import WorkerSettings
from inturn_reports.settings import ReportSettings

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "deploy" / "helm" / "inturn" / "values.schema.json"
#: The known keys of each `config` map, read by the chart's render-time check (``.Files.Get``).
SETTINGS = REPO / "deploy" / "helm" / "inturn" / "files" / "settings.json"

#: Each `config` map of the chart (a path in values.yaml) and the settings class of the processes it feeds.
#: The shared `config` reaches every component, so it holds only what every one of them reads (KafkaSettings).
CONFIG_MAPS: dict[tuple[str, ...], type[BaseSettings]] = {
    ("config",): KafkaSettings,
    ("worker", "config"): WorkerSettings,
    ("webhook", "config"): WebhookSettings,
    ("bridge", "config"): BridgeSettings,
    ("report", "config"): ReportSettings,
}

#: Fields the chart sets from other values (the contract between the chart and the services names them even before
#: a settings class has them); a key of these in a `config` map is refused by the chart with the value to set.
CHART_MANAGED: dict[tuple[str, ...], dict[str, str]] = {
    ("config",): {
        "topic_partitions": "topics.partitions",
        "topic_replication": "topics.replication",
        "topic_retention_ms": "topics.retentionMs",
    },
    ("worker", "config"): {"worker_http_port": "worker.port", "worker_instance_id": "worker.staticMembership"},
    ("webhook", "config"): {"webhook_port": "webhook.port", "webhook_internal_port": "webhook.internalPort"},
    ("bridge", "config"): {
        "bridge_http_port": "bridge.port",
        "bridge_internal_port": "bridge.internalPort",
        "bridge_mode": "bridge.mode",
        "bridge_push_allow_unauthenticated": "bridge.push.allowUnauthenticated",
    },
    ("report", "config"): {"report_out_dir": "report.output"},
}

#: A settings value as a values.yaml value: lists and maps may also be written as the environment's JSON string.
_ANY = ["string", "number", "boolean", "object", "array", "null"]


#: Settings that are secrets without being SecretStr (librdkafka's settings often hold a SASL password).
SECRET_FIELDS = frozenset({"kafka_client_config"})


def _is_secret(field: str, prop: dict[str, Any]) -> bool:
    """A secret: a SecretStr (pydantic marks it writeOnly), alone, in a list or optional, or a named one."""
    return field in SECRET_FIELDS or '"writeOnly": true' in json.dumps(prop)


def _types(prop: dict[str, Any], defs: dict[str, Any]) -> tuple[list[str], list[Any] | None]:
    """The JSON types (and a string enum, if any) a pydantic JSON-schema property accepts."""
    branches = prop.get("anyOf", [prop])
    types: list[str] = []
    enum: list[Any] | None = None
    for branch in branches:
        if "$ref" in branch:
            branch = defs[branch["$ref"].rsplit("/", 1)[-1]]
        kind = branch.get("type")
        if "enum" in branch:
            enum = [*(enum or []), *branch["enum"]]
            kind = kind or "string"
        if "const" in branch:
            enum = [*(enum or []), branch["const"]]
            kind = kind or "string"
        if kind is None:
            return _ANY, None
        if kind in ("object", "array"):
            # The environment takes them as JSON (or, for lists, comma separated): a string is fine too.
            types += [kind, "string"]
        elif kind == "number":
            types += ["number"]
        else:
            types.append(kind)
    if enum is not None and None not in enum and "null" in types:
        enum.append(None)
    return sorted(set(types)), enum


def config_properties(path: tuple[str, ...]) -> dict[str, Any]:
    """The schema of one `config` map: its typed properties; other keys are left to the chart's own check."""
    cls = CONFIG_MAPS[path]
    json_schema = cls.model_json_schema()
    json_props = json_schema["properties"]
    defs = json_schema.get("$defs", {})
    # A field the chart sets is refused in every map (a component's map can hold the shared fields too).
    managed = {k: v for fields in CHART_MANAGED.values() for k, v in fields.items() if k in cls.model_fields}
    managed.update(CHART_MANAGED[path])
    props: dict[str, Any] = {}
    for field, info in sorted(cls.model_fields.items()):
        if _is_secret(field, json_props[field]):
            continue
        types, enum = _types(json_props[field], defs)
        prop: dict[str, Any] = {"type": types if len(types) > 1 else types[0]}
        if enum is not None:
            prop["enum"] = enum
        description = info.description or ""
        if field in managed:
            description = f"Set by the chart from {managed[field]}; not here."
        prop["description"] = description
        props[field] = prop
    for field, source in sorted(managed.items()):
        props.setdefault(field, {"description": f"Set by the chart from {source}; not here."})
    return {
        "type": "object",
        "description": (
            f"{cls.__name__} fields by name (env INTURN_<FIELD>); generated by `python -m "
            "inturn_devtools.chart_schema`. Secrets are refused here: they come from secrets.items. Other keys are "
            "refused by the chart's own check, naming the closest setting."
        ),
        "additionalProperties": True,
        "properties": dict(sorted(props.items())),
    }


def generate(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (values.schema.json as a dict) with every `config` map replaced by the generated one."""
    out: dict[str, Any] = json.loads(json.dumps(schema))
    for path in CONFIG_MAPS:
        node = out
        for key in path[:-1]:
            node = node["properties"][key]
        node["properties"][path[-1]] = config_properties(path)
    return out


def known_keys() -> dict[str, list[str]]:
    """Each `config` map by its dotted path in values.yaml, and the keys its schema has (files/settings.json)."""
    return {".".join(path): sorted(config_properties(path)["properties"]) for path in CONFIG_MAPS}


def render_known_keys(keys: dict[str, list[str]]) -> str:
    """files/settings.json's text."""
    return json.dumps(keys, indent=2) + "\n"


def render(schema: dict[str, Any]) -> str:
    """The schema as the committed file's text."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when the file differs")
    args = parser.parse_args(argv)
    current = SCHEMA.read_text()
    wanted = {SCHEMA: render(generate(json.loads(current))), SETTINGS: render_known_keys(known_keys())}
    if args.check:
        stale = [path for path, text in wanted.items() if not path.is_file() or path.read_text() != text]
        for path in stale:
            print(
                f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path} differs from the settings classes; "
                "run: python -m inturn_devtools.chart_schema",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path, text in wanted.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
