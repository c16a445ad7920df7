"""``inturn sim``: run the WhatsApp-Cloud-like platform simulator as a process."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``sim``."""
    parser = sub.add_parser(
        "sim",
        help="run the platform simulator (WhatsApp Cloud API double)",
        description="Serve the send API, call the webhook back with signed statuses after a random latency, "
        "log device receipts. Settings: INTURN_SIM_* (see docs/platform-simulator.md); flags override them. "
        "Stops gracefully on SIGTERM/SIGINT.",
    )
    parser.add_argument("--host", help="interface to listen on (INTURN_SIM_HOST)")
    parser.add_argument("--port", type=int, help="port to listen on (INTURN_SIM_PORT)")
    parser.add_argument("--webhook-url", help="where status callbacks go (INTURN_SIM_WEBHOOK_URL)")
    parser.add_argument("--receipts-path", help="JSON-lines receipt log file (INTURN_SIM_RECEIPTS_PATH)")
    parser.add_argument("--seed", type=int, help="seed of every random draw (INTURN_SIM_SEED)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from inturn.logs import configure
    from inturn.settings import load
    from inturn.settings.sim import SimSettings
    from inturn_cli.flags import given
    from inturn_sim.run import main

    options = {name: f"sim_{name}" for name in ("host", "port", "webhook_url", "receipts_path", "seed")}
    settings = load(SimSettings, **given(args, **options))
    configure(settings.log_format, settings.log_level)
    return main(settings)
