"""An engine with no request measured in the window (a cache of one block: every prompt
overflows) has no hit rate, percentile or mean: summary.json holds them null with the reason
in `unknown`, as the README says of every figure a run cannot know; an engine with requests
keeps its `unknown` as it was. Real run directories, written by `replay simulate`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from analysis.metrics import MEASURED_ONLY, NOTHING_MEASURED
from replay.cli import app

SIM = ["simulate", "--policies", "vllm", "--sessions", "2", "--duration-min", "3",
       "--timing", "engine"]  # fmt: skip


def simulate(out: Path, *extra: str) -> dict[str, Any]:
    res = CliRunner().invoke(app, [*SIM, *extra, "--out", str(out)])
    assert res.exit_code == 0, res.output + res.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    summary: dict[str, Any] = json.loads((run / "summary.json").read_text())
    return summary


def test_figures_over_no_measured_request_are_null_with_the_reason(tmp_path: Path) -> None:
    e = simulate(tmp_path / "empty", "--capacity-blocks", "1")["engines"]["vllm"]
    assert e["requests"] == 0
    for key in ("hit_rate", "ideal_hit_rate", "ttft_p50", "e2e_p50", "slo_request_share"):
        assert e[key] is None, key
        assert e["unknown"][key] == NOTHING_MEASURED, key
    assert list(e["unknown"])[-1] == "drift"  # drift stays last
    # What was measured stays a number: nothing was generated in the window.
    assert e["output_tokens_per_min_per_gpu"] == 0.0 and "output_tokens" not in e["unknown"]


def test_an_engine_with_requests_keeps_its_unknown_as_it_was(tmp_path: Path) -> None:
    e = simulate(tmp_path / "full")["engines"]["vllm"]
    assert e["requests"] > 0 and e["hit_rate"] is not None
    assert list(e["unknown"]) == ["drift"]
    assert not set(MEASURED_ONLY) & set(e["unknown"])


def test_the_keys_said_unknown_are_metrics_of_the_registry() -> None:
    """A misspelt key would never be said unknown, its null left without a reason."""
    from replay.metric_registry import METRICS

    assert set(MEASURED_ONLY) <= {m.key for m in METRICS}
