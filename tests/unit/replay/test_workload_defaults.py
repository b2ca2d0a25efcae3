"""One source of defaults: the workload config (`replay.workload`).

`replay run` (embedded and with endpoints), `replay simulate`, the simulator's `SimConfig` and
the embedded default's file all resolve sessions, duration, window, gap cap, warm-up and seed
to `DEFAULT_WORKLOAD` / `TIMED_WARMUP_S`; the embedded default's file overrides only its own
choices (time scale, engines, trace, model, blocks, and its load: the sessions offering the
demo's load, derived beside the setting). Each command runs through the real command
line up to the point where its plan is made (the run's `RunPlan`, the sweep's `plan`), which is
captured instead of executed: nothing is started, nothing is timed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

import replay.client.orchestrate as orchestrate
import replay.commands.simulate as sim_cmd
from replay.cli import app
from replay.emulator.defaults import default_run_path, load_default_run
from replay.sim.runner import SimConfig
from replay.traces import sample_path
from replay.windows import default_window_min, seconds
from replay.workload import DEFAULT_WORKLOAD as W
from replay.workload import TIMED_WARMUP_S, WorkloadConfig

ROOT = Path(__file__).resolve().parents[3]
CAPTURED = 7  # the exit code of a command stopped where its plan was made


def _workload_of_run(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[WorkloadConfig, Any]:
    seen: dict[str, Any] = {}

    def capture(**kwargs: Any) -> None:
        seen.update(kwargs)
        raise typer.Exit(CAPTURED)

    monkeypatch.setattr(orchestrate, "RunPlan", capture)  # `replay run` imports it when used
    res = CliRunner().invoke(app, ["run", *args, "--no-panel"], catch_exceptions=False)
    assert res.exit_code == CAPTURED, res.output
    return seen["workload"], seen["time_scale"]


def _assert_workload_defaults(w: WorkloadConfig, sessions: int = W.sessions) -> None:
    assert w.sessions == sessions
    assert w.duration_s == W.duration_s
    assert w.window == W.window
    assert w.gap_cap_s == W.gap_cap_s
    assert w.seed == W.seed
    assert w.subagents == W.subagents
    assert (w.start_lo, w.start_hi) == (W.start_lo, W.start_hi)


def test_the_workload_configs_window_is_the_last_two_thirds_of_its_duration() -> None:
    assert W.window == seconds(default_window_min(W.duration_s / 60))


def test_replay_run_embedded_takes_the_workload_config_and_its_files_own_choices(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    w, time_scale = _workload_of_run(monkeypatch, "--out", str(tmp_path / "r"))
    # Its own load: the session count offering the demo's load (configs/workloads/default.yaml).
    _assert_workload_defaults(w, sessions=load_default_run().sessions)
    assert w.warmup_s == TIMED_WARMUP_S
    # The override the embedded default names: its time scale (30: 45 minutes in 90 s).
    assert time_scale == load_default_run().time_scale == 30


def test_replay_run_with_an_endpoint_takes_the_workload_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    w, time_scale = _workload_of_run(
        monkeypatch, "--endpoint", "vllm=http://127.0.0.1:9", "--out", str(tmp_path / "r")
    )
    _assert_workload_defaults(w)
    assert w.warmup_s == TIMED_WARMUP_S
    assert time_scale == 1.0  # real engines run in real time


@pytest.mark.parametrize(("timing", "warmup"), [("trace", W.warmup_s), ("engine", TIMED_WARMUP_S)])
def test_replay_simulate_takes_the_workload_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, timing: str, warmup: float
) -> None:
    seen: list[SimConfig] = []

    def capture(tr: Any, trace: str, configs: list[SimConfig], *a: Any) -> list[Any]:
        seen.extend(configs)
        raise typer.Exit(CAPTURED)

    monkeypatch.setattr(sim_cmd, "_sweep", capture)
    res = CliRunner().invoke(
        app,
        ["simulate", "--trace", str(sample_path()), "--policies", "vllm", "--sessions",
         str(W.sessions), "--timing", timing, "--out", str(tmp_path / "s")],
    )  # fmt: skip
    assert res.exit_code == CAPTURED, res.output
    (cfg,) = seen
    assert (cfg.duration_s, cfg.window, cfg.seed) == (W.duration_s, W.window, W.seed)
    assert (cfg.subagents, cfg.warmup_s) == (W.subagents, warmup)


def test_trace_stats_cap_gaps_as_the_replay_does() -> None:
    res = CliRunner().invoke(app, ["traces", "stats", str(sample_path()), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["tool_gap_cap_s"] == W.gap_cap_s


def test_sim_config_defaults_are_the_workload_configs() -> None:
    cfg = SimConfig(policy="vllm", sessions=1)
    assert (cfg.duration_s, cfg.window, cfg.seed) == (W.duration_s, W.window, W.seed)
    assert (cfg.subagents, cfg.warmup_s) == (W.subagents, W.warmup_s)


def test_the_embedded_default_file_repeats_none_of_the_workload_defaults() -> None:
    """It names only its own choices (its load, `sessions`, derived in the file); a workload
    key there besides would be a second source."""
    data = yaml.safe_load(default_run_path().read_text())
    assert set(data) & {"duration_min", "window", "warmup_s", "seed"} == set()
    d = load_default_run()
    assert (d.duration_min * 60, d.seed) == (W.duration_s, W.seed)
    assert seconds(d.window) == W.window and d.warmup_s == TIMED_WARMUP_S


@pytest.mark.parametrize(
    "path",
    [
        *sorted((ROOT / "replay" / "commands").glob("*.py")),
        ROOT / "replay" / "sim" / "runner.py",
        ROOT / "replay" / "emulator" / "defaults.py",
    ],
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_no_default_duration_window_or_gap_cap_is_written_out_again(path: Path) -> None:
    """2700 s / 900 s (45 / 15 minutes) and the 300 s gap cap live only in WorkloadConfig."""
    code = path.read_text()
    found = re.findall(r"(?<![\w.])(?:2700|900|300)(?:\.0)?(?![\w.])", code)
    assert not found, f"{path.relative_to(ROOT)} repeats the workload's defaults: {found}"
