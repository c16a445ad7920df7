"""Run every benchmark module (or those named) and write ``var/bench/<name>.json`` and ``results.json``."""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import platform
import sys
import time
from pathlib import Path
from typing import Any

import benchmarks

OUT = Path("var/bench")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; exit 1 if any of them failed."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("names", nargs="*", help="benchmark names (bench_<name>.py); all when omitted")
    parser.add_argument("--quick", action="store_true", help="smaller scenarios, for a smoke run")
    args = parser.parse_args(argv)
    names = args.names or sorted(
        m.name.removeprefix("bench_") for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_")
    )
    OUT.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "machine": {"platform": platform.platform(), "python": sys.version.split()[0], "cpus": _cpus()},
        "date": time.strftime("%Y-%m-%d"),
        "results": {},
    }
    failed = False
    for name in names:
        module = importlib.import_module(f"benchmarks.bench_{name}")
        print(f"== bench {name}", flush=True)
        try:
            result = module.run(quick=args.quick)
        except Exception as exc:  # noqa: BLE001 - one failing benchmark must not hide the others' figures
            print(f"bench {name} failed: {exc!r}", file=sys.stderr)
            failed = True
            continue
        (OUT / f"{name}.json").write_text(json.dumps(result, indent=2))
        results["results"][name] = result
        print(json.dumps(result, indent=2))
    (OUT / "results.json").write_text(json.dumps(results, indent=2))
    return 1 if failed else 0


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    sys.exit(main())
