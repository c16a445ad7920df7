"""The worker's hot path, compiled to C by mypyc, and whether what is loaded is what the sources say.

The modules in ``HOT_PATH`` are plain, strictly typed Python. ``python -m inturn_devtools.compile`` (run by
``make setup``, and by the image build) compiles them with mypyc into extension modules beside their sources,
which Python then imports in their place; without it they run as Python, with the same behaviour. Why, and what
it saves: docs/compiled.md.

An extension module built from an older source would run code that is no longer in the repository, so the build
records a hash of each source (``MANIFEST``), and ``stale`` names every compiled module whose source has changed
since. ``inturn worker`` and ``inturn webhook`` refuse to start with one, and the test suite stops before its
first test.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from inturn.errors import InturnError

#: The modules compiled, in the order a message meets them. Two of the worker's stay Python because their tests
#: build them with stand-ins of other types, which a compiled function rejects at the call: ``intake`` (per
#: consumed batch, and a few calls per record) and ``checkpoint`` (per round). See docs/compiled.md.
HOT_PATH: tuple[str, ...] = (
    "inturn_worker.partition",
    "inturn_worker.room",
    "inturn_worker.timeouts",
    "inturn_worker.limits",
    "inturn.platforms.base",
    "inturn.platforms.transport",
    "inturn.platforms.whatsapp",
    "inturn.platforms.messenger",
    "inturn.platforms.instagram",
    "inturn.platforms.generic",
    "inturn.platforms.twilio",
    "inturn.platforms.telegram",
    "inturn_worker.ack_reader",
    "inturn_worker.acks",
    "inturn_worker.events",
    "inturn_worker.dead_letters",
    "inturn.kafka",
    "inturn.metrics.lockfree",
    # The webhook's callback path, but for its FastAPI application (FastAPI reads its handlers' signatures).
    "inturn_webhook.body",
    "inturn_webhook.signature",
    "inturn_webhook.statuses",
    "inturn_webhook.platforms",
    "inturn_webhook.rooms",
    "inturn_webhook.confirmations",
    "inturn_webhook.intake",
    "inturn_webhook.callbacks",
)

#: mypyc's group: its shared library is the module ``inturn.hot_path__mypyc`` (``libs/inturn``).
GROUP = "inturn.hot_path"

#: Written by the compile step beside this file: module name -> SHA-256 of the source it was compiled from.
MANIFEST = Path(__file__).with_name("compiled-sources.json")


class StaleCompiledModuleError(InturnError):
    """A compiled module no longer matches its source."""


@dataclass(frozen=True, slots=True)
class HotModule:
    """One module of ``HOT_PATH``: where it is, and whether an extension module stands in for it."""

    name: str
    source: Path
    extension: Path | None  # the compiled module Python imports instead of the source, if there is one

    @property
    def compiled(self) -> bool:
        return self.extension is not None


def source_digest(path: Path) -> str:
    """The hash the manifest keeps for a source file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def hot_modules(names: tuple[str, ...] = HOT_PATH) -> list[HotModule]:
    """Each module of ``names`` with its source and the extension module found for it (imports no module of
    them, only their packages)."""
    found = []
    for name in names:
        package, _, leaf = name.rpartition(".")
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise InturnError(f"package {package} of the hot path is not importable")
        folder = Path(next(iter(spec.submodule_search_locations)))
        extensions = [folder / f"{leaf}{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES]
        extension = next((path for path in extensions if path.exists()), None)
        found.append(HotModule(name, folder / f"{leaf}.py", extension))
    return found


def recorded(manifest: Path = MANIFEST) -> dict[str, str]:
    """What the last compile step recorded: module name -> hash of its source (empty when nothing is compiled)."""
    try:
        digests: dict[str, str] = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return {}
    return digests


def stale(modules: list[HotModule] | None = None, manifest: Path = MANIFEST) -> list[str]:
    """The compiled modules whose source changed since they were compiled (or that no manifest vouches for)."""
    modules = hot_modules() if modules is None else modules
    digests = recorded(manifest)
    return [
        module.name
        for module in modules
        if module.compiled and (not module.source.exists() or digests.get(module.name) != source_digest(module.source))
    ]


def require_fresh() -> list[HotModule]:
    """The hot path's modules; ``StaleCompiledModuleError`` when a compiled one no longer matches its source."""
    modules = hot_modules()
    old = stale(modules)
    if old:
        raise StaleCompiledModuleError(
            f"compiled module(s) {', '.join(old)} no longer match their source: rebuild them with "
            "`python -m inturn_devtools.compile` (make setup does), or remove every compiled module with "
            "`python -m inturn_devtools.compile --clean`"
        )
    return modules
