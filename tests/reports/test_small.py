"""``small.percentiles``: exact percentiles from counted values, worked out by hand (the oracle comparisons in
test_transform.py check them against whole generated nights); and the allocator of the driver's Arrow tables."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from inturn_reports.transform.small import ValueCounts, percentiles

LEVELS = [0.5, 0.95, 0.99]


@pytest.mark.parametrize(
    ("values", "counts", "expected"),
    [
        # Four values once each: positions 1.5, 2.85 and 2.97 between the sorted values 10, 20, 30, 40.
        ((10, 20, 30, 40), (1, 1, 1, 1), [25.0, 38.5, 39.7]),
        # 5 three times, 9 once (5, 5, 5, 9): position 1.5 falls between two fives; 2.85 between 5 and 9.
        ((5, 9), (3, 1), [5.0, 8.4, 8.88]),
        ((7,), (4,), [7.0, 7.0, 7.0]),
    ],
)
def test_percentiles_interpolate_between_the_counted_values(
    values: tuple[int, ...], counts: tuple[int, ...], expected: list[float | None]
) -> None:
    assert percentiles(ValueCounts(values, counts), LEVELS) == pytest.approx(expected, rel=1e-12)


def test_no_values_have_no_percentiles() -> None:
    assert percentiles(ValueCounts((), ()), LEVELS) == [None, None, None]


@pytest.mark.parametrize(("given", "expected"), [(None, "system"), ("mimalloc", "mimalloc")])
def test_the_report_process_allocates_arrow_memory_with_the_c_library_unless_told_otherwise(
    given: str | None, expected: str
) -> None:
    # Arrow picks its allocator when first imported, so each case runs in a process of its own.
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if given is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = given
    code = "import inturn_reports.job, pyarrow; print(pyarrow.default_memory_pool().backend_name)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == expected
