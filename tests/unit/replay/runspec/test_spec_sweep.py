"""`replay simulate` over the spec: the workload flags it shares with `replay run` reach every
point of the sweep (--gap-cap-s, --seed as the first of --seeds), and the gap cap reaches the
simulated workload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import replay.commands.scale_guard as scale_guard
import replay.commands.simulate as sim_cmd
from replay.cli import app
from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace

CAPTURED = 7


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from replay.traces.synth import SynthConfig, write_synth

    path = tmp_path_factory.mktemp("spec-corpus") / "small.jsonl"
    write_synth(path, SynthConfig(n_trajectories=6, seed=1, scale=16))
    return path


def test_the_shared_workload_flags_reach_every_point(
    monkeypatch: pytest.MonkeyPatch, corpus: Path, tmp_path: Path
) -> None:
    seen: list[SimConfig] = []

    def capture(tr: Any, trace: str, configs: list[SimConfig], *a: Any) -> list[Any]:
        seen.extend(configs)
        raise typer.Exit(CAPTURED)

    monkeypatch.setattr(sim_cmd, "_sweep", capture)
    # `replay simulate` imports it where it uses it: patched where it lives.
    monkeypatch.setattr(scale_guard, "check_sim_work", lambda *a: None)
    res = CliRunner().invoke(
        app,
        ["simulate", "--trace", str(corpus), "--policies", "vllm", "--sessions", "2,3",
         "--gap-cap-s", "60", "--seed", "4", "--seeds", "2", "--warmup-s", "10",
         "--out", str(tmp_path / "s")],
    )  # fmt: skip
    assert res.exit_code == CAPTURED, res.output
    assert {c.gap_cap_s for c in seen} == {60.0} and {c.warmup_s for c in seen} == {10.0}
    assert [c.seed for c in seen] == [4, 5, 4, 5]  # --seed first, then +1 (--seeds 2)
    assert [c.sessions for c in seen] == [2, 2, 3, 3]


def test_the_first_seed_names_the_runs(
    monkeypatch: pytest.MonkeyPatch, corpus: Path, tmp_path: Path
) -> None:
    seen: list[Any] = []

    def stop(tr: Any, trace: str, configs: list[Any], *a: Any) -> list[Any]:
        seen.extend(configs)
        raise typer.Exit(CAPTURED)

    monkeypatch.setattr(sim_cmd, "_sweep", stop)
    res = CliRunner().invoke(
        app,
        ["simulate", "--trace", str(corpus), "--policies", "vllm", "--sessions", "2",
         "--seed", "4", "--seeds", "2", "--out", str(tmp_path / "s")],
    )  # fmt: skip
    assert res.exit_code == CAPTURED, res.output
    assert [c.run_name for c in seen] == ["vllm-s2-seed4", "vllm-s2-seed5"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--gap-cap-s", "-1"], "--gap-cap-s -1: must be 0 or more"),
        (["--warmup-s", "-1"], "--warmup-s -1: must be 0 or more"),
        (["--seed", "-2"], "--seed -2: must be 0 or more"),
        (["--capacity-blocks", "0"], "--capacity-blocks 0: must be positive"),
        (["--capacity-blocks", str(10**23)], f"--capacity-blocks {10**23}: must be at most"),
        (["--seed", str(2**64)], f"--seed {2**64}: must be at most 9223372036854775807"),
    ],
)
def test_bad_shared_flags_are_named(
    corpus: Path, tmp_path: Path, flags: list[str], message: str
) -> None:
    res = CliRunner().invoke(
        app,
        ["simulate", "--trace", str(corpus), "--policies", "vllm", "--sessions", "2", *flags,
         "--out", str(tmp_path / "s")],
    )  # fmt: skip
    assert res.exit_code == 2 and message in " ".join(res.output.split()), res.output


def test_the_gap_cap_reaches_the_simulated_workload(corpus: Path) -> None:
    trace = load_trace(corpus)
    base = SimConfig(policy="vllm", sessions=2, duration_s=600.0, window=(0.0, 600.0))
    capped = SimConfig(
        policy="vllm", sessions=2, duration_s=600.0, window=(0.0, 600.0), gap_cap_s=0.0
    )
    a, b = simulate(trace, base), simulate(trace, capped)
    # No tool waits at all: the same sessions send more requests in the same ten minutes.
    assert len(b.records) > len(a.records)
