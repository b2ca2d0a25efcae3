from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from analysis.metrics import window_metrics
from analysis.runs import load_run
from dashboards.timeline import (
    advance,
    diff_vs_best_other,
    metrics_at,
    ratio_vs_best_other,
    run_end_s,
    truncate,
    versus_best_other,
)
from replay.rundir import RunWriter
from replay.rundir_models import Manifest


def _row(
    engine: str, turn: int, sched: float, first: float, done: float, **kw: Any
) -> dict[str, Any]:
    row = {
        "engine": engine,
        "session": 0,
        "trajectory": "t0",
        "agent": "main",
        "turn": turn,
        "scheduled_s": sched,
        "sent_s": sched,
        "first_token_s": first,
        "done_s": done,
        "prompt_tokens": 1000,
        "cached_tokens": 500,
        "ideal_cached_tokens": 800,
        "output_tokens": 60,
        "expected_output_tokens": 60,
        "status": "ok",
        "tool_gap_s": 0.0,
        "priming": False,
        "attempt": 0,
    }
    row.update(kw)
    return row


@pytest.fixture
def tiny_run(tmp_path: Path) -> Path:
    """Two engines, three requests each, done at 10/20/30 s (a) and 12/24/36 s (b)."""
    manifest = {"engines": [{"name": "a", "gpus": 1}, {"name": "b", "gpus": 2}]}
    w = RunWriter(tmp_path / "run", Manifest.model_validate(manifest)).open()
    for i in range(3):
        w.add(_row("a", i, 10.0 * i, 10.0 * i + 1, 10.0 * (i + 1), cached_tokens=900))
        w.add(_row("b", i, 12.0 * i, 12.0 * i + 2, 12.0 * (i + 1)))
    w.close()
    return tmp_path / "run"


def test_truncate_keeps_requests_completed_by_t(tiny_run: Path) -> None:
    run = load_run(tiny_run)
    cut = truncate(run, 20.0)
    assert sorted(cut.requests["done_s"]) == [10.0, 12.0, 20.0]
    assert len(run.requests) == 6  # the original is untouched


def test_the_end_position_counts_what_the_report_counts(tmp_path: Path) -> None:
    """A request still in flight when the run stopped (no done_s) is counted at the run's
    end, as the report counts it (its first token was in the window); and with a stop (the
    measured window's end) the window is the report's even when the slider runs past it."""
    w = RunWriter(
        tmp_path / "run", Manifest.model_validate({"engines": [{"name": "a", "gpus": 1}]})
    ).open()
    w.add(_row("a", 0, 0.0, 1.0, 10.0))
    w.add(_row("a", 1, 10.0, 12.0, math.nan, status="cancelled", output_tokens=0))
    w.add(_row("a", 2, 14.0, 15.0, 40.0))
    w.close()
    run = load_run(tmp_path / "run")
    assert truncate(run, 40.0) is run
    assert len(truncate(run, 39.0).requests) == 1  # in flight, and the one done at 40: out
    report = window_metrics(run, (0.0, 30.0)).set_index("engine")
    page = metrics_at(run, 40.0, 0.0, stop=30.0)
    for key in ("prefill_tokens_per_min_per_gpu", "output_tokens_per_min_per_gpu", "hit_rate"):
        assert page.loc["a", key] == pytest.approx(report.loc["a", key]), key


def test_versus_best_other_in_both_directions() -> None:
    """TTFT (lower is better): 0.1 s against a rival's 5 s reads "50.0× better" in green,
    the rival "50.0× worse" in red; throughput (higher is better) the other way round.
    Losses compare by difference, in the metric's direction."""
    show = str
    assert versus_best_other(0.1, 5.0, False, show) == ("50.0× better", "green")
    assert versus_best_other(5.0, 0.1, False, show) == ("50.0× worse", "red")
    assert versus_best_other(5.0, 0.1, True, show) == ("50.0× better", "green")
    assert versus_best_other(0.1, 5.0, True, show) == ("50.0× worse", "red")
    assert versus_best_other(-4.0, -6.0, True, show) == ("2.0 better", "green")  # a smaller loss
    assert versus_best_other(-6.0, -4.0, True, show) == ("2.0 worse", "red")
    assert versus_best_other(1.0, 1.0, True, show) == ("same", "gray")
    assert versus_best_other(0.0, 0.0, True, show) is None
    assert versus_best_other(1.0, math.nan, True, show) is None


def test_metrics_at_counts_only_completed_requests(tiny_run: Path) -> None:
    run = load_run(tiny_run)
    m = metrics_at(run, 20.0)
    # a: done at 10 and 20 (both first tokens in [0, 20)); b: only the one done at 12.
    assert m.loc["a", "requests"] == 2
    assert m.loc["b", "requests"] == 1
    # Output tokens per minute per GPU over [0, 20 s): a has 120 tokens on 1 GPU.
    assert m.loc["a", "output_tokens_per_min_per_gpu"] == pytest.approx(120 / (20 / 60))
    assert m.loc["b", "output_tokens_per_min_per_gpu"] == pytest.approx(60 / (20 / 60) / 2)
    assert m.loc["a", "hit_rate"] == pytest.approx(0.9)
    assert m.loc["b", "ttft_p50"] == pytest.approx(2.0)


def test_metrics_before_anything_completed_are_empty_not_errors(tiny_run: Path) -> None:
    m = metrics_at(load_run(tiny_run), 5.0)
    assert list(m["requests"]) == [0, 0]
    assert math.isnan(m.loc["a", "hit_rate"])


def test_ratio_against_best_other() -> None:
    values = pd.Series({"fs": 4.0, "vllm": 2.0, "sglang": 1.0})
    up = ratio_vs_best_other(values, higher_is_better=True)
    assert up.to_dict() == {"fs": 2.0, "vllm": 0.5, "sglang": 0.25}
    down = ratio_vs_best_other(values, higher_is_better=False)
    # Lower is better: each compared with the lowest of the others.
    assert down.to_dict() == {"fs": 4.0, "vllm": 2.0, "sglang": 0.5}


def test_ratio_is_nan_without_a_rival_or_a_value() -> None:
    assert math.isnan(ratio_vs_best_other(pd.Series({"only": 3.0}), True)["only"])
    r = ratio_vs_best_other(pd.Series({"a": float("nan"), "b": 2.0, "c": 0.0}), True)
    assert math.isnan(r["a"])
    assert r["c"] == 0.0  # 0 ÷ 2
    assert math.isnan(r["b"])  # the best other is 0: no meaningful ratio


def test_losses_get_a_difference_not_a_ratio() -> None:
    profit = pd.Series({"fs": -6.88, "vllm": -4.96, "sglang": 2.0})
    ratio = ratio_vs_best_other(profit, higher_is_better=True)
    # A loss divided by a loss would read "1.6×" for the worse engine: no ratio there.
    assert math.isnan(ratio["fs"]) and math.isnan(ratio["vllm"])
    assert math.isnan(ratio["sglang"])  # the best other (vllm) is a loss
    diff = diff_vs_best_other(profit, higher_is_better=True)
    assert diff.to_dict() == pytest.approx({"fs": -8.88, "vllm": -6.96, "sglang": 6.96})


def test_advance_moves_by_speed_and_stops_at_the_end() -> None:
    assert advance(100.0, 20.0, 0.5, 2700.0) == (110.0, False)
    assert advance(2695.0, 100.0, 0.5, 2700.0) == (2700.0, True)


def test_run_end_is_the_last_event() -> None:
    df = pd.DataFrame({"done_s": [1.0, None], "first_token_s": [0.5, 7.0], "scheduled_s": [0, 6]})
    assert run_end_s(df) == 7.0
    assert run_end_s(df.iloc[0:0]) == 1.0


def test_panel_number_formats() -> None:
    from dashboards.views.common import fmt

    assert fmt(float("nan"), "%") == "—"
    assert fmt(0.8437, "%") == "84.4%"
    assert fmt(2.5, "s") == "2.50 s"
    assert fmt(0.42, "s") == "420 ms"
    assert fmt(0.0042, "s") == "4.2 ms"
    assert fmt(-6.881, "$") == "-$6.88"
    assert fmt(0.04561, "$") == "$0.0456"
    assert fmt(233_512.0, "tok") == "233.5K"
    assert fmt(4_740_000.0, "tok") == "4.74M"
    assert fmt(919.0, "") == "919"
