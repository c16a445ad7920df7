"""``inturn dev up|down|env``: the real local stack (Kafka, PostgreSQL, Pub/Sub emulator)."""

from __future__ import annotations

import argparse
import os
import signal
import threading
from pathlib import Path

from inturn.errors import InturnError
from inturn_cli.actions import add_actions
from inturn_cli.output import add_json, print_json
from inturn_devtools.stack import LocalStack, StackState, load_state, save_state, stop_detached

STATE_FILE = Path(os.environ.get("INTURN_STATE_DIR", "var")) / "devstack.json"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``dev`` and its actions."""
    parser = sub.add_parser(
        "dev",
        help="run the local stack: Kafka, PostgreSQL, Pub/Sub emulator",
        description="Start a real Kafka broker (KRaft), PostgreSQL and the Pub/Sub emulator on free loopback "
        "ports, create inturn's Kafka topics and the Pub/Sub topic with the ordered subscription the bridge reads "
        "(`inturn pubsub setup` with its defaults), and print the environment variables that point inturn at them.",
    )
    actions = add_actions(parser)
    up = actions.add_parser("up", help="start the stack (in the foreground until Ctrl-C, or --detach)")
    up.add_argument("--detach", action="store_true", help=f"leave it running; state in {STATE_FILE}")
    up.set_defaults(handler=_up)
    down = actions.add_parser("down", help="stop a detached stack and delete its data")
    down.set_defaults(handler=_down)
    env = actions.add_parser("env", help='print `export` lines for a detached stack (eval "$(inturn dev env)")')
    add_json(env)
    env.set_defaults(handler=_env)


def _print_env(state: StackState) -> None:
    for key, value in state.env().items():
        print(f"export {key}={value}")


def _up(args: argparse.Namespace) -> int:
    if STATE_FILE.exists():
        print(f"a stack is already up ({STATE_FILE}); `inturn dev down` first")
        return 1
    stack = LocalStack()
    state = stack.start()
    try:
        _provision(state)
    except BaseException:
        stack.stop()
        raise
    _print_env(state)
    if args.detach:
        save_state(state, STATE_FILE)
        return 0
    print("# stack is up; Ctrl-C stops it", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        stopped.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stack.stop()
    return 0


def _provision(state: StackState) -> None:
    """What a newcomer would otherwise have to make by hand: inturn's Kafka topics, and the Pub/Sub topic with the
    ordered subscription the bridge reads by default, so ``inturn bridge --mode pull`` works with no other step."""
    from inturn import topics
    from inturn.kafka import make_admin
    from inturn.settings import KafkaSettings, load
    from inturn.settings.bridge import BridgeSettings
    from inturn_bridge.subscription import DEFAULT_TOPIC, ensure

    os.environ.update(state.env())
    kafka = load(KafkaSettings)
    created = topics.create(make_admin(kafka), kafka)
    print(f"# kafka topics: {', '.join(created) or 'all existed'}", flush=True)
    bridge = load(BridgeSettings)
    setup = ensure(bridge.bridge_project, DEFAULT_TOPIC, bridge.bridge_subscription)
    print(f"# pubsub: {setup.topic} -> {setup.subscription} (ordered)", flush=True)


def _down(args: argparse.Namespace) -> int:
    if not STATE_FILE.exists():
        print("no detached stack is up")
        return 0
    stop_detached(load_state(STATE_FILE))
    STATE_FILE.unlink()
    print("stopped")
    return 0


def _env(args: argparse.Namespace) -> int:
    if not STATE_FILE.exists():
        raise InturnError(f"no detached stack is up ({STATE_FILE} not found); `inturn dev up --detach` first")
    state = load_state(STATE_FILE)
    if args.json:
        print_json(state.env())
    else:
        _print_env(state)
    return 0
