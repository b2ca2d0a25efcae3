"""experiments/pressure_sweep.py (issue 22's experiment): every bad flag is named, and a tiny
sweep writes one row per run with the saturation figures of its timing."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from replay.traces import sample_path
from tests.scripts import load_experiment

ROOT = Path(__file__).resolve().parents[4]


def _script() -> ModuleType:
    return load_experiment("pressure_sweep")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variant", "norules"], "--variant 'norules': expected NAME:RULES"),
        (["--variant", "x:gate=all"], "'gate=all': gate must be one of prompt, prompt+output"),
        (["--variant", "x:admission=pin"], "admission must be park or schedule"),
        (["--timings", "trace,fast"], "--timings: 'fast' is not one of trace, engine"),
        (["--sessions", "4,x"], "--sessions: 'x' is not a positive whole number"),
        (["--profile-set", "max_batch"], "--profile-set: 'max_batch' is not KEY=VALUE"),
        (["--profile-set", "max_batch=lots"], "--profile-set: 1 validation error"),
    ],
)
def test_a_bad_flag_is_named(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _script().main(["--trace", str(sample_path()), *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_a_tiny_sweep_writes_a_row_per_run(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    argv = ["--trace", str(sample_path()), "--policies", "vllm", "--sessions", "2"]
    argv += ["--timings", "trace,engine", "--variant", "adopted:", "--json", str(out)]
    assert _script().main(argv) == 0
    rows = json.loads(out.read_text())
    assert [(r["timing"], r["sessions"]) for r in rows] == [("trace", 2), ("engine", 2)]
    trace, engine = rows
    assert trace["prefill_demand"] < 1 and not trace["saturated"]
    assert engine["waiting_mean"] < 1 and not engine["saturated"]
    assert 0 < engine["hit"] <= 1 and engine["ttft_p50"] > 0
