"""``small.percentiles``: exact percentiles from counted values, worked out by hand (the oracle comparisons in
test_transform.py check them against whole generated nights)."""

from __future__ import annotations

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
