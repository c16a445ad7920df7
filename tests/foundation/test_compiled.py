"""The hot path compiled by mypyc (docs/compiled.md): what is imported, and a compiled module older than its source."""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import json
from pathlib import Path

from inturn.compiled import HOT_PATH, MANIFEST, HotModule, hot_modules, source_digest, stale


def test_each_module_of_the_hot_path_is_imported_from_its_extension_when_one_was_built() -> None:
    modules = hot_modules()
    assert [module.name for module in modules] == list(HOT_PATH)
    for module in modules:
        imported = importlib.import_module(module.name)
        assert imported.__spec__ is not None
        # What the import system loaded. mypyc starts a compiled module that another one imports from its group's
        # library, and names its folder after that library's: the file name is the module's own.
        loaded = Path(imported.__spec__.origin or "")
        if module.compiled:
            assert module.extension is not None
            assert isinstance(imported.__spec__.loader, importlib.machinery.ExtensionFileLoader), module.name
            assert loaded.name == module.extension.name, module.name
        else:
            assert loaded == module.source, module.name


def test_after_the_compile_step_every_module_of_the_hot_path_is_compiled_and_vouched_for() -> None:
    """make setup compiles (the Makefile's compile step); the manifest it writes names every module it built."""
    if not MANIFEST.exists():  # the hot path runs as Python (compile --clean): then nothing may be compiled
        assert [module.name for module in hot_modules() if module.compiled] == []
        return
    recorded = json.loads(MANIFEST.read_text())
    assert sorted(recorded) == sorted(HOT_PATH)
    assert [module.name for module in hot_modules() if not module.compiled] == []
    assert stale() == []


def test_a_compiled_module_whose_source_changed_or_that_no_manifest_names_is_stale(tmp_path: Path) -> None:
    sources = {name: tmp_path / f"{name}.py" for name in ("fresh", "edited", "unlisted", "pure")}
    for name, path in sources.items():
        path.write_text(f"VALUE = {name!r}\n")
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({name: source_digest(sources[name]) for name in ("fresh", "edited", "pure")}))
    sources["edited"].write_text("VALUE = 'changed after the build'\n")
    modules = [
        HotModule(name, path, None if name == "pure" else tmp_path / f"{name}.so") for name, path in sources.items()
    ]
    assert stale(modules, manifest) == ["edited", "unlisted"]
    assert stale(modules, tmp_path / "missing.json") == ["fresh", "edited", "unlisted"]


def test_no_compiled_function_binds_one_exception_name_to_two_types() -> None:
    """mypyc gives a name the type of its first binding: ``except A as exc`` then ``except B as exc`` in one
    function raises TypeError when B is caught (seen in ``Sends.send``: every retried 429 failed its room)."""
    shared = []
    for module in hot_modules():
        for function in ast.walk(ast.parse(module.source.read_text())):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            caught: dict[str, set[str]] = {}
            for node in ast.walk(function):
                if isinstance(node, ast.ExceptHandler) and node.name and node.type is not None:
                    caught.setdefault(node.name, set()).add(ast.unparse(node.type))
            shared += [f"{module.name}.{function.name}: {name}" for name, types in caught.items() if len(types) > 1]
    assert shared == []
