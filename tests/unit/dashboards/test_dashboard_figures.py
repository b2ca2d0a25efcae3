"""Figure builders are plain functions: DataFrames in, plotly figures out, no Streamlit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dashboards.figures import (
    cumulative_output_figure,
    engine_bars_figure,
    session_turns_figure,
    sweep_figure,
    throughput_over_time_figure,
    whatif_figure,
)


def _requests() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "engine": ["a", "a", "b", "b", "b"],
            "done_s": [30.0, 90.0, 10.0, 70.0, None],
            "output_tokens": [100, 50, 10, 20, 999],
        }
    )


def test_cumulative_output_bins_and_marks_the_time() -> None:
    fig = cumulative_output_figure(_requests(), end_s=120.0, t=60.0, bins=4)
    by_name = {tr.name: tr for tr in fig.data}
    assert set(by_name) == {"a", "b"}
    # Bins of 30 s, plotted at their right edge: a's 100 tokens done at 30 s show by 60 s.
    assert list(by_name["a"].y) == [0, 100, 100, 150]
    # b's unfinished request (no done_s) is not counted.
    assert list(by_name["b"].y) == [10, 10, 30, 30]
    assert list(by_name["a"].x) == [0.5, 1.0, 1.5, 2.0]  # minutes
    assert fig.layout.shapes[0].x0 == 1.0  # the slider's line at 60 s


def test_throughput_over_time_per_minute() -> None:
    # 90 s of run in 2 bins: bins round up to 10 s multiples, so two 50-s bins.
    fig = throughput_over_time_figure(_requests(), bins=2)
    a = next(tr for tr in fig.data if tr.name == "a")
    assert list(a.y) == pytest.approx([1.2, 1.2])  # one request per 50 s = 1.2 per minute
    assert "50 s bins" in fig.layout.title.text


def test_throughput_over_time_without_completed_requests() -> None:
    df = pd.DataFrame({"engine": ["a"], "done_s": [None], "output_tokens": [1]})
    fig = throughput_over_time_figure(df)
    assert list(fig.data[0].y) == [0.0]


def test_sweep_lines_with_error_bars_and_capacity_marks() -> None:
    # analysis' aggregated sweep: one row per engine and session count, with `_se` columns.
    agg = pd.DataFrame(
        {
            "engine": ["fs", "fs", "vllm"],
            "sessions": [16, 8, 8],
            "hit_rate": [0.7, 0.85, 0.3],
            "hit_rate_se": [0.01, np.nan, 0.02],
        }
    )
    fig = sweep_figure(agg, "hit_rate", "Hit rate (%)", percent=True, crossings={"fs": 12.5})
    fs = next(tr for tr in fig.data if tr.name == "fs")
    assert list(fs.x) == [8, 16]  # sorted by load
    assert list(fs.y) == pytest.approx([85.0, 70.0])
    assert list(fs.error_y.array) == pytest.approx([0.0, 1.0])  # unknown SE: no bar
    assert fig.layout.xaxis.title.text == "concurrent sessions"
    assert fig.layout.shapes[0].x0 == 12.5
    assert "working set = cache" in fig.layout.annotations[0].text


def test_two_configurations_of_an_engine_are_two_lines() -> None:
    """Runs of two routers at the same session counts are two lines, in the engine's colour
    and two dashes (one line used to zig-zag between them), each crossing marked in it."""
    agg = pd.DataFrame(
        {
            "engine": ["vllm"] * 4,
            "series": ["vllm · router round_robin"] * 2 + ["vllm · router state_aware"] * 2,
            "sessions": [4, 8, 4, 8],
            "hit_rate": [0.5, 0.4, 0.9, 0.8],
        }
    )
    fig = sweep_figure(agg, "hit_rate", "Hit rate (%)", percent=True,
                       crossings={"vllm · router state_aware": 6.0})  # fmt: skip
    names = [tr.name for tr in fig.data]
    assert names == ["vllm · router round_robin", "vllm · router state_aware"]
    rr, sa = fig.data
    assert list(rr.x) == [4, 8] and list(sa.y) == pytest.approx([90.0, 80.0])
    assert rr.line.color == sa.line.color and rr.line.dash != sa.line.dash
    assert fig.layout.shapes[0].line.color == rr.line.color


def test_sweep_without_standard_errors() -> None:
    agg = pd.DataFrame({"engine": ["a"], "sessions": [4], "ttft_p50": [0.5]})
    fig = sweep_figure(agg, "ttft_p50", "TTFT p50 (s)")
    assert fig.data[0].error_y.visible is False
    assert not fig.layout.shapes


def test_whatif_lines_and_zero_line() -> None:
    curves = pd.DataFrame(
        {"engine": ["a", "a", "b", "b"], "x": [2.0, 1.0, 1.0, 2.0], "y": [-1.0, 1.0, 3.0, 2.0]}
    )
    fig = whatif_figure(curves, "x", "y", "GPU rate", "profit")
    a = next(tr for tr in fig.data if tr.name == "a")
    assert list(a.x) == [1.0, 2.0]  # sorted along x
    assert fig.layout.shapes[0].y0 == 0.0


def test_engine_bars_label_missing_values() -> None:
    fig = engine_bars_figure({"a": 5.2941, "b": math.nan}, "Profit", "$")
    assert list(fig.data[0].text) == ["5.294", "n/a"]


def test_session_turns_stack_and_second_axis() -> None:
    turns = pd.DataFrame(
        {
            "label": ["1. t#0", "2. t#1"],
            "turn": [0, 1],
            "cached_tokens": [0, 900],
            "redundant_tokens": [0, 50],
            "computed_tokens": [1000, 150],
            "ttft_s": [0.5, 0.2],
            "tool_gap_s": [0.0, 12.0],
        }
    )
    fig = session_turns_figure(turns)
    assert fig.layout.barmode == "stack"
    bars = [tr for tr in fig.data if tr.type == "bar"]
    assert [tr.name.split(" ")[0] for tr in bars] == ["cached", "redundant", "new"]
    lines = [tr for tr in fig.data if tr.type == "scatter"]
    assert all(tr.yaxis == "y2" for tr in lines)
    assert list(lines[1].y) == [0.0, 12.0]
    # Requests sit at their position; which turn it was shows on hover.
    assert list(bars[0].x) == [1, 2]
    assert list(bars[0].customdata) == ["1. t#0", "2. t#1"]
