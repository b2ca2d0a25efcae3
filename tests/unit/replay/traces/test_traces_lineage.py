"""`replay.traces.lineage.common_blocks`: the leading hash blocks two requests share, whatever
the widths their ids are stored in."""

from __future__ import annotations

import numpy as np
import pytest

from replay.traces.lineage import common_blocks


@pytest.mark.parametrize("dtype", [np.int64, np.uint32])
def test_a_request_that_extends_another_shares_all_of_the_shorter(dtype: type) -> None:
    a = np.arange(10, dtype=dtype)
    b = np.arange(14, dtype=dtype)
    assert common_blocks(a, b) == common_blocks(b, a) == 10


def test_the_first_difference_ends_what_they_share() -> None:
    a = np.array([5, 6, 7, 8], dtype=np.int64)
    b = np.array([5, 6, 9, 8, 1], dtype=np.int64)
    assert common_blocks(a, b) == 2
    assert common_blocks(a, np.array([1, 6, 7, 8])) == 0
    assert common_blocks(a, a[:0]) == 0


def test_ids_stored_in_two_widths_compare_by_value() -> None:
    """The bytes of equal ids differ between widths: they are compared element by element."""
    a = np.array([5, 6, 7], dtype=np.uint32)
    b = np.array([5, 6, 7, 9], dtype=np.int64)
    assert common_blocks(a, b) == 3
    assert common_blocks(a, np.array([5, 7, 7], dtype=np.int64)) == 1
