"""The timeline's gaps between steps, as the conversation page writes them."""

from __future__ import annotations

import pytest

from webui.timefmt import gap


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-1.0, "0.0 s"),  # clocks of two workers may disagree a little: never a negative gap
        (0.42, "0.4 s"),
        (9.94, "9.9 s"),
        (12.4, "12 s"),
        (89.0, "89 s"),
        (90.0, "2 min"),
        (3_000.0, "50 min"),
        (5_400.0, "2 h"),
        (129_600.0, "2 d"),
    ],
)
def test_a_gap_reads_in_the_unit_that_suits_it(seconds: float, shown: str) -> None:
    assert gap(seconds) == shown
