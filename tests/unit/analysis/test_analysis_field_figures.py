"""The field's figures beside ours (issue 35, point 2), hand-computed on small run
directories: InferenceX's tok/s/GPU and aiperf's theoretical prefix-cache hit rate; and a
simulated run's records carry the theoretical counts of the trace (replay.traces.prefix)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analysis.metrics import window_metrics
from analysis.runs import load_run
from replay.cli import app
from replay.traces.loader import load_trace
from replay.traces.prefix import prefix_blocks

Builder = Callable[[], Any]
SAMPLE = Path(__file__).resolve().parents[3] / "replay" / "data" / "sample-weka.jsonl.gz"


def _run(builder: Builder) -> Path:
    b = builder()
    # engine a (1 GPU), window [100, 200)
    b.req("a", 90.0, first=91.0, done=95.0, prompt=5000, priming=True)  # warm-up: out
    b.req("a", 100.0, first=104.0, done=130.0, prompt=1000, cached=900, output=100,
          theoretical_hit_blocks=10, theoretical_blocks=16)  # fmt: skip
    b.req("a", 150.0, first=151.0, done=250.0, prompt=3000, cached=0, output=400,
          theoretical_hit_blocks=30, theoretical_blocks=48)  # fmt: skip
    b.req("a", 160.0, first=None, done=None, status="error", prompt=700,
          theoretical_hit_blocks=11, theoretical_blocks=11)  # fmt: skip
    b.req(
        "a",
        205.0,
        first=206.0,
        done=210.0,
        prompt=9000,
        output=5,
        theoretical_hit_blocks=0,
        theoretical_blocks=141,
    )  # fmt: skip  first token after
    # engine b (2 GPUs): records without the counts (a run before issue 35)
    b.req("b", 120.0, first=121.0, done=141.0, prompt=4000, cached=3000, output=60)
    for r in b.rows:
        if r.status == "error":
            r.first_token_s = r.done_s = None
    return b.write("run", config={"window": [100, 200], "sessions": 1, "token_scale": 2.0})


def test_inferencex_tok_s_per_gpu_and_aiperf_theoretical_hit(builder: Builder) -> None:
    m = window_metrics(load_run(_run(builder))).set_index("engine")
    a, b = m.loc["a"], m.loc["b"]
    # Measured: the two ok requests with first token in the window (the priming one, the
    # error and the one after the window out). Every prompt token, cached ones included,
    # and every output token, over first start (100) to last end (250), at full size (×2).
    assert a["inferencex_total_tok_s_per_gpu"] == pytest.approx((1000 + 3000 + 100 + 400) * 2 / 150)
    assert b["inferencex_total_tok_s_per_gpu"] == pytest.approx(
        (4000 + 60) * 2 / 21 / 2
    )  # 120 to 141
    assert a["theoretical_hit_rate_aiperf"] == pytest.approx(40 / 64)
    assert math.isnan(b["theoretical_hit_rate_aiperf"])  # no counts: unknown, not 0


def test_a_simulated_runs_records_carry_the_traces_counts(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app,
        [
            "simulate", "--trace", str(SAMPLE), "--policies", "vllm", "--sessions", "3",
            "--duration-min", "4", "--timing", "engine", "--out", str(tmp_path),
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    (run_dir,) = [p.parent for p in tmp_path.glob("*/summary.json")]
    df = load_run(run_dir).requests
    assert df["theoretical_blocks"].notna().all() and len(df)
    want: dict[str, Any] = {}
    for root in load_trace(SAMPLE).trajectories:
        want.update(prefix_blocks(root))
    for row in df.itertuples():
        hits, totals = want[row.trajectory]
        assert (row.theoretical_hit_blocks, row.theoretical_blocks) == (
            hits[row.turn],
            totals[row.turn],
        )
    summary = window_metrics(load_run(run_dir)).iloc[0]
    assert 0 < summary["theoretical_hit_rate_aiperf"] <= 1
    assert summary["inferencex_total_tok_s_per_gpu"] > 0
