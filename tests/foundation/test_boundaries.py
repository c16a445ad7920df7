"""The house stays as built: services never import each other, and libs, services and spark_jobs never import
local tooling, the CLI or a service (docs/architecture.md, "Boundaries").

Imports are read from the source (``import``/``from`` statements anywhere in a file, and
``importlib.import_module`` with a literal name), so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SERVICES = {
    "inturn_worker": "services/worker/inturn_worker",
    "inturn_webhook": "services/webhook/inturn_webhook",
    "inturn_bridge": "services/bridge/inturn_bridge",
    "inturn_sim": "services/platform_sim/inturn_sim",
}
TOOLING = {"inturn_devtools", "inturn_cli"}
REPORTS = "inturn_reports"


def forbidden_for(package: str) -> set[str]:
    """The top-level packages ``package`` must never import."""
    services = set(SERVICES)
    if package in SERVICES:
        return (services - {package}) | TOOLING | {REPORTS}
    if package == "inturn":
        return services | TOOLING | {REPORTS}
    if package == REPORTS:
        return services | TOOLING
    raise ValueError(f"no rule for {package}")


PACKAGES = {"inturn": "libs/inturn", REPORTS: "spark_jobs/inturn_reports", **SERVICES}


@dataclass(frozen=True)
class Violation:
    """One forbidden import: where, and what."""

    path: str
    line: int
    imported: str


def imported_names(source: str) -> list[tuple[int, str]]:
    """(line, dotted module name) of every import in ``source``, including ``importlib.import_module("x")``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value.partition(":")[0]))
    return found


def violations(root: Path, package: str, folder: str) -> list[Violation]:
    """The forbidden imports in the package ``package`` found under ``root / folder``."""
    banned = forbidden_for(package)
    out = []
    for path in sorted((root / folder).rglob("*.py")):
        for line, name in imported_names(path.read_text()):
            if name.split(".")[0] in banned:
                out.append(Violation(str(path.relative_to(root)), line, name))
    return out


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_a_package_imports_nothing_it_must_not(package: str) -> None:
    assert violations(ROOT, package, PACKAGES[package]) == []


@pytest.mark.parametrize(
    ("package", "line"),
    [
        ("inturn_worker", "from inturn_webhook.app import create_app"),
        ("inturn_sim", "import inturn_worker.app"),
        ("inturn", "from inturn_devtools.kafka import LocalKafka"),
        ("inturn", "module = importlib.import_module('inturn_reports.settings')"),
        ("inturn_reports", "from inturn_devtools.process import free_port"),
        ("inturn_bridge", "def lazy():\n    from inturn_cli.main import main\n"),
    ],
)
def test_a_forbidden_import_added_to_a_copy_of_the_tree_is_found(tmp_path: Path, package: str, line: str) -> None:
    folder = PACKAGES[package]
    target = tmp_path / folder
    target.mkdir(parents=True)
    (target / "clean.py").write_text("import asyncio\nfrom inturn.schemas import Message\n")
    (target / "planted.py").write_text(f"import importlib\n\n{line}\n")
    found = violations(tmp_path, package, folder)
    assert [v.path for v in found] == [f"{folder}/planted.py"]
    assert found[0].imported.split(".")[0] in forbidden_for(package)


WAITING = "devtools/inturn_devtools/waiting.py"
READING = "devtools/inturn_devtools/reading.py"


def deadline_loops(root: Path, folders: list[str]) -> list[str]:
    """``path:line`` of every ``while`` loop under ``folders`` whose condition reads ``time.monotonic()``, or that
    names a ``deadline``: a wait with a deadline written again instead of ``inturn_devtools.waiting``."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            relative = str(path.relative_to(root))
            if relative == WAITING:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.While) and (
                    any(isinstance(sub, ast.Attribute) and sub.attr == "monotonic" for sub in ast.walk(node.test))
                    or any(isinstance(sub, ast.Name) and "deadline" in sub.id for sub in ast.walk(node))
                ):
                    found.append(f"{relative}:{node.lineno}")
    return found


def test_tests_and_tooling_wait_through_the_one_waiting_module() -> None:
    assert deadline_loops(ROOT, ["tests", "devtools"]) == []


def test_a_deadline_loop_added_to_a_copy_of_the_tree_is_found(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "clean.py").write_text("def f(ok):\n    while not ok():\n        pass\n")
    (tmp_path / "tests" / "planted.py").write_text(
        "import time\n\ndef f(ok):\n    deadline = time.monotonic() + 5\n"
        "    while not ok() and time.monotonic() < deadline:\n        time.sleep(0.1)\n"
    )
    (tmp_path / "tests" / "other.py").write_text(
        "def g(ok, deadline):\n    while not ok():\n        assert now() < deadline\n"
    )
    assert deadline_loops(tmp_path, ["tests"]) == ["tests/other.py:2", "tests/planted.py:5"]
