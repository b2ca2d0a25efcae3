"""Standard errors from time bins, significance at two standard errors, paired deltas."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

from analysis.runs import load_run
from analysis.uncertainty import (
    binned_metrics,
    compare,
    metrics_with_se,
    paired_deltas,
    standard_error,
)

Builder = Callable[[], Any]


def _two_bins(builder: Builder, b_tokens: int) -> Any:
    b = builder()
    # engine a (1 GPU): 60 tokens in minute one, 120 in minute two -> 90/min, SE 30
    b.req("a", 5.0, first=10.0, done=10.0, output=60, turn=0)
    b.req("a", 65.0, first=70.0, done=70.0, output=120, turn=1)
    # engine b (2 GPUs): the same tokens per GPU in both minutes -> SE 0
    b.req("b", 5.0, first=10.0, done=10.0, output=b_tokens, turn=0)
    b.req("b", 65.0, first=70.0, done=70.0, output=b_tokens, turn=1)
    return load_run(b.write(f"run{b_tokens}", config={"window": [0, 120]}))


def test_binned_standard_error_hand_computed(builder: Builder) -> None:
    run = _two_bins(builder, 320)
    bins = binned_metrics(run, bin_s=60)
    a = bins[bins["engine"] == "a"]["output_tokens_per_min_per_gpu"].tolist()
    assert a == [60.0, 120.0]
    table = metrics_with_se(run).set_index("engine")
    assert table.loc["a", "output_tokens_per_min_per_gpu"] == pytest.approx(90.0)
    assert table.loc["a", "output_tokens_per_min_per_gpu_se"] == pytest.approx(30.0)
    assert table.loc["b", "output_tokens_per_min_per_gpu"] == pytest.approx(160.0)
    assert table.loc["b", "output_tokens_per_min_per_gpu_se"] == pytest.approx(0.0)


def test_compare_marks_significance_at_two_standard_errors(builder: Builder) -> None:
    table = metrics_with_se(_two_bins(builder, 320))  # diff 70 > 2 x 30
    cmp = compare(table, "output_tokens_per_min_per_gpu").set_index("engine")
    assert cmp.loc["a", "reference"] == "b"
    assert cmp.loc["a", "diff"] == pytest.approx(-70.0)
    assert cmp.loc["a", "se_diff"] == pytest.approx(30.0)
    assert bool(cmp.loc["a", "significant"]) is True
    table = metrics_with_se(_two_bins(builder, 300))  # diff 60, not more than 2 x 30
    cmp = compare(table, "output_tokens_per_min_per_gpu").set_index("engine")
    assert bool(cmp.loc["a", "significant"]) is False


def test_compare_lower_is_better_and_unknown_metric() -> None:
    table = pd.DataFrame(
        {"engine": ["x", "y", "z"], "ttft_p50": [1.0, 3.0, 2.0], "ttft_p50_se": [0.1] * 3}
    )
    cmp = compare(table, "ttft_p50").set_index("engine")
    assert cmp.loc["y", "reference"] == "x"  # the best other is the lowest latency
    assert cmp.loc["x", "reference"] == "z"
    with pytest.raises(KeyError, match="no column 'nope' to compare"):
        compare(table, "nope")


def test_standard_error_needs_two_values() -> None:
    assert math.isnan(standard_error([1.0]))
    assert standard_error([1.0, 3.0, math.nan]) == pytest.approx(1.0)


def test_paired_deltas_hand_computed(builder: Builder) -> None:
    b = builder()
    for turn, ttft_b in enumerate((2.0, 3.0, 4.0)):
        b.req("a", 10.0 * turn, turn=turn, first=10.0 * turn + 1, done=10.0 * turn + 5)
        b.req("b", 10.0 * turn, turn=turn, first=10.0 * turn + ttft_b, done=10.0 * turn + 9)
    b.req("a", 50.0, turn=9)  # only engine a served this one: not a pair
    b.req("a", 0.0, turn=0, session=3, priming=True)
    b.req("b", 0.0, turn=0, session=3, priming=True)
    run = load_run(b.write(config={"window": [0, 100]}))
    d = paired_deltas(run, "a", "b").set_index("quantity")
    assert d.loc["ttft", "pairs"] == 3
    assert d.loc["ttft", "mean_delta"] == pytest.approx(-2.0)
    assert d.loc["ttft", "se"] == pytest.approx(1 / math.sqrt(3))
    assert bool(d.loc["ttft", "significant"]) is True
    assert d.loc["e2e", "mean_delta"] == pytest.approx(-4.0)
    assert bool(d.loc["cached_tokens", "significant"]) is False  # identical: delta 0, SE 0
