"""`replay run`'s seed band says when it holds fewer seeds than asked: a seed on which an
engine measured no request is left out of the band (`replay.sim.band.simulate_band`), and
with none left there is no band; the run's output says which, not silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.client.config import EngineSpec
from replay.client.orchestrate import RunOutcome
from replay.commands.run import _band
from replay.runspec.model import EngineRun, RunSpec, WorkloadSpec
from replay.traces import load_trace, sample_path


def _spec(duration_min: float) -> RunSpec:
    engines = [
        EngineRun(engine=EngineSpec(name="vllm", url="http://x"), executor="emulated")  # type: ignore[arg-type]
    ]
    wl = WorkloadSpec(sessions=1, duration_min=duration_min, seed=0, token_scale=16.0)
    return RunSpec(workload=wl, engines=engines)


def test_a_band_with_no_seed_measured_is_named_not_silent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = RunOutcome(tmp_path, "completed", {}, 0, [], {})
    band = _band(outcome, _spec(0.05), load_trace(sample_path()), 2)
    said = " ".join(capsys.readouterr().err.split())
    assert band is None
    assert "the seed band holds 0 of 2 seeds" in said and "no band is shown" in said
    assert not (tmp_path / "band.json").exists()


def test_a_full_band_says_nothing_of_missing_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = RunOutcome(tmp_path, "completed", {}, 0, [], {})
    band = _band(outcome, _spec(4), load_trace(sample_path()), 1)
    assert band is not None and band.seeds == [0]
    assert "the seed band holds" not in capsys.readouterr().err
