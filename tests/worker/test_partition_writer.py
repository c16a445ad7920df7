"""``Partition`` is the one writer of a partition's state (docs/architecture.md, "The hot path"): its state is
private, and no module of the services outside partition.py assigns, deletes or mutates what it exposes.

Ruff's SLF001 (enabled for services/ in pyproject.toml) already refuses ``part._x`` outside the class; this test
also covers the public read-only names (``part.epoch = 1``, ``part.rooms[...] = ...``, ``part.rooms.clear()``),
which a lint rule cannot tell from another object's attributes.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PARTITION = ROOT / "services/worker/inturn_worker/partition.py"
MUTATORS = {"clear", "pop", "popitem", "update", "setdefault", "add", "discard", "remove", "append", "extend"}


def _partition_class() -> ast.ClassDef:
    tree = ast.parse(PARTITION.read_text())
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Partition")


def _slots(cls: ast.ClassDef) -> set[str]:
    """Partition's state: the attributes its constructor sets."""
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return {
        target.attr
        for node in ast.walk(init)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
    }


def _exposed(cls: ast.ClassDef) -> set[str]:
    """The names Partition shows to others: its properties."""
    return {
        node.name
        for node in cls.body
        if isinstance(node, ast.FunctionDef)
        and any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)
    }


def _not_self(node: ast.expr) -> bool:
    return not (isinstance(node, ast.Name) and node.id == "self")


def writes(source: str, state: set[str], exposed: set[str]) -> list[str]:
    """Where ``source`` writes a partition's state from outside: a private slot reached on another object, an
    exposed name assigned or deleted, an exposed container's item assigned or deleted, or a mutator called on it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in state and _not_self(node.value):
            found.append(f"line {node.lineno}: .{node.attr}")
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Subscript):
                target = target.value
            if isinstance(target, ast.Attribute) and target.attr in exposed and _not_self(target.value):
                found.append(f"line {target.lineno}: .{target.attr} assigned")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr in exposed
        ):
            found.append(f"line {node.lineno}: .{node.func.value.attr}.{node.func.attr}()")
    return sorted(found, key=lambda hit: int(hit.split()[1].rstrip(":")))


def test_every_attribute_of_a_partition_is_private() -> None:
    state = _slots(_partition_class())
    assert state, "no state found: the test would pass on anything"
    assert sorted(name for name in state if not name.startswith("_")) == []


def test_nothing_outside_partition_py_writes_a_partitions_state() -> None:
    cls = _partition_class()
    state, exposed = _slots(cls), _exposed(cls)
    assert {"epoch", "rooms", "paused", "fenced"} <= exposed
    found = {}
    for path in sorted((ROOT / "services").rglob("*.py")):
        if path == PARTITION:
            continue
        if hits := writes(path.read_text(), state, exposed):
            found[str(path.relative_to(ROOT))] = hits
    assert found == {}


def test_the_check_finds_the_writes_the_worker_used_to_make() -> None:
    """What intake, room and checkpoint did before a partition was its state's one writer."""
    cls = _partition_class()
    state, exposed = _slots(cls) | {"_cursors"}, _exposed(cls)
    source = """
part.epoch = 1
part.paused = True
part._cursors[room] = -1
part.rooms[room_id] = Room(room_id, part)
del part.rooms[room_id]
part.rooms.clear()
self._rooms = {}
"""
    assert writes(source, state, exposed) == [
        "line 2: .epoch assigned",
        "line 3: .paused assigned",
        "line 4: ._cursors",
        "line 5: .rooms assigned",
        "line 6: .rooms assigned",
        "line 7: .rooms.clear()",
    ]


def test_no_class_of_the_worker_is_over_250_lines_or_takes_over_5_arguments() -> None:
    """A part of the worker gets what it needs, not the whole worker (issue 41's bounds)."""
    found = []
    for path in sorted((ROOT / "services/worker/inturn_worker").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            arguments = len(init.args.args) - 1 + len(init.args.kwonlyargs) if init else 0
            if lines > 250 or arguments > 5:
                found.append(f"{path.name}: {node.name} ({lines} lines, {arguments} arguments)")
    assert found == []
