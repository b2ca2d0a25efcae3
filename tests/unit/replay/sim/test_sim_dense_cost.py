"""`experiments/dense_cost.py`: what each of dense's checkpoints costs, on the bundled sample."""

from __future__ import annotations

import re

import pytest

from replay.traces import sample_path
from tests.scripts import load_experiment


@pytest.fixture(scope="module")
def dc():
    return load_experiment("dense_cost")


def test_more_checkpoints_mean_more_evictions_and_each_costs_time(dc, capsys):
    dc.main(
        ["--trace", str(sample_path()), "--sessions", "37", "--every", "1088,1000000000",
         "--repeat", "1"]
    )  # fmt: skip
    out = capsys.readouterr().out
    rows = re.findall(r"every +([\d,]+) tokens: [\d.]+ s, ([\d,]+) evictions", out)
    assert [r[0] for r in rows] == ["1,088", "1,000,000,000"]
    dense, none = (int(r[1].replace(",", "")) for r in rows)
    assert dense > none  # the checkpoints it writes are evicted
    assert re.search(r"the 1 s target leaves -?[\d.]+ s for [\d,]+ checkpoints", out)
    assert re.search(r"heap alone takes [\d.]+ µs", out)


def test_the_heap_floor_is_a_positive_time_per_operation(dc):
    assert 0 < dc.heap_floor(64, n=2_000) < 1e-3
