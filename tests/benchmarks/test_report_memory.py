"""The report benchmark's peak memory: a process tree's resident memory, each process's pages counted once."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from benchmarks.bench_report import _tree_rss_bytes, rss_bytes

MB = 2**20
# Holds HOLD_MB of its own pages, starts a child per argv[1], and prints "ready" once the child is running.
_PARENT = """
import os, subprocess, sys, time
held = b"x" * ({hold} * 2**20)  # written, so resident
if sys.argv[1] == "fork":  # a child that never execs: its resident pages are the parent's
    read, write = os.pipe()
    if os.fork() == 0:
        os.write(write, b"1")
        time.sleep(120)
        os._exit(0)
    os.read(read, 1)
else:  # a child that execs a program holding pages of its own
    own = "import time; b = b'y' * ({own} * 2**20); print(1, flush=True); time.sleep(120)"
    child = subprocess.Popen([sys.executable, "-c", own], stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline()
print("ready", flush=True)
time.sleep(120)
"""
HOLD_MB, OWN_MB = 200, 100


@contextmanager
def _tree(kind: str) -> Iterator[int]:
    code = _PARENT.format(hold=HOLD_MB, own=OWN_MB)
    proc = subprocess.Popen([sys.executable, "-c", code, kind], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        yield proc.pid
    finally:
        subprocess.run(["pkill", "-KILL", "-s", str(proc.pid)], check=False)  # the whole session: parent and child
        proc.wait()


def test_a_child_forked_and_not_execed_is_not_counted_again() -> None:
    with _tree("fork") as pid:
        parent = rss_bytes(pid)
        assert parent >= HOLD_MB * MB
        # Counting the child would nearly double it: the child's VmRSS is the parent's pages.
        assert _tree_rss_bytes(pid) < parent + 50 * MB


def test_a_child_that_execed_is_counted_with_its_own_pages() -> None:
    with _tree("exec") as pid:
        parent = rss_bytes(pid)
        assert _tree_rss_bytes(pid) >= parent + OWN_MB * MB
