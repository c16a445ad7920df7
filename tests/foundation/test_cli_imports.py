"""What every ``inturn`` process imports before its command runs: the parser of all commands, nothing heavier.

The worker, the webhook and the simulator are ``inturn <command>`` processes; a command module whose ``register``
imports a client library makes every one of them carry it. The Pub/Sub client (google-cloud-pubsub, grpc, proto)
alone is about 37 MiB of resident memory.
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("google.cloud", "google.api_core", "grpc", "proto")


def test_building_the_cli_parser_imports_no_pubsub_client() -> None:
    code = (
        "import sys\n"
        "from inturn_cli.main import build_parser\n"
        "build_parser()\n"
        f"heavy = {HEAVY!r}\n"
        "print(' '.join(sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in heavy))))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    assert loaded == [], f"building the parser imported {loaded[:10]} ({len(loaded)} modules)"
