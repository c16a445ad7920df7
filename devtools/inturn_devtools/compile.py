"""Compile the worker's hot path (``inturn.compiled.HOT_PATH``) with mypyc, in place.

``python -m inturn_devtools.compile`` type-checks the modules with the project's mypy settings, generates C,
builds one extension module per source beside it (and mypyc's shared library, ``inturn/hot_path__mypyc``), and
records each source's hash in ``inturn.compiled.MANIFEST``. ``--clean`` removes all of it, so everything runs as
Python again. Needs a C compiler and Python's headers (``make setup`` installs gcc). Why: docs/compiled.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from inturn.compiled import GROUP, HOT_PATH, MANIFEST, hot_modules, recorded, source_digest

ROOT = Path(__file__).resolve().parents[2]


def clean() -> int:
    """Remove every compiled module of the hot path, its shared library and the manifest; how many files."""
    removed = 0
    # The modules compiled last time too: one since taken off the list would otherwise stay compiled.
    for module in hot_modules(tuple(dict.fromkeys([*HOT_PATH, *recorded()]))):
        if module.extension is not None:
            module.extension.unlink()
            removed += 1
    for library in MANIFEST.parent.glob(f"{GROUP.rpartition('.')[2]}__mypyc*"):
        library.unlink()
        removed += 1
    if MANIFEST.exists():
        MANIFEST.unlink()
        removed += 1
    return removed


def compile_hot_path() -> list[Path]:
    """Build the extension modules and put them beside their sources; the files written."""
    # Imported here: mypyc and setuptools are build-time tools, not needed to run inturn.
    from mypyc.build import mypycify
    from setuptools import Distribution  # type: ignore[import-untyped]  # setuptools ships no type information

    modules = hot_modules()
    clean()  # a module left compiled from an older build would shadow its new source
    digests = {module.name: source_digest(module.source) for module in modules}
    with tempfile.TemporaryDirectory(prefix="inturn-mypyc-") as scratch:
        work = Path(scratch)
        cwd = os.getcwd()
        os.chdir(ROOT)  # mypy reads the project's settings (pyproject.toml) from here
        try:
            extensions = mypycify(
                [str(module.source.relative_to(ROOT)) for module in modules],
                opt_level="3",
                group_name=GROUP,
                target_dir=str(work / "c"),
            )
            # The build command alone: ``setup()`` would also read pyproject.toml as package metadata.
            dist = Distribution({"name": "inturn-hot-path", "ext_modules": extensions})
            build = dist.get_command_obj("build_ext")
            build.build_lib = str(work / "lib")
            build.build_temp = str(work / "tmp")
            dist.run_command("build_ext")
        finally:
            os.chdir(cwd)
        written = []
        for built in sorted((work / "lib").rglob("*.so")):
            relative = built.relative_to(work / "lib")
            if relative.parts[0] == "inturn":
                target = MANIFEST.parent.joinpath(*relative.parts[1:])
            else:  # a service package: beside its source
                module = next(m for m in modules if m.name.split(".")[0] == relative.parts[0])
                target = module.source.parent.joinpath(*relative.parts[1:])
            shutil.copyfile(built, target)
            written.append(target)
    MANIFEST.write_text(json.dumps(digests, indent=2, sort_keys=True) + "\n")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m inturn_devtools.compile",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--clean", action="store_true", help="remove the compiled modules: run everything as Python")
    args = parser.parse_args(argv)
    if args.clean:
        print(f"removed {clean()} compiled file(s); the hot path runs as Python")
        return 0
    started = time.monotonic()
    written = compile_hot_path()
    print(f"compiled {len(written)} extension module(s) with mypyc in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
