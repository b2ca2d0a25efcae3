"""`--preset agentx` (issue 35, point 1): the fields it fills in, the user's flags and config
file winning over it, the manifest and notes recording it, and a clear refusal of an unknown
name; the start rules it uses (`replay.workload`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from replay.presets import AGENTX, NO_GAP_CAP_S, PRESETS, preset_notes
from replay.runspec.live import RunFlags, resolve_new, stored
from replay.runspec.resolve import FLAGS, Layer, SpecError, workload
from replay.runspec.sweep import sweep_workload
from replay.traces.model import Trace, Trajectory
from replay.workload import Workload, WorkloadConfig, start_at_time

BASE = Layer("the workload config")


def test_the_preset_fills_in_its_fields() -> None:
    spec, used = workload([Layer(FLAGS, {"preset": "agentx"}), BASE])
    assert spec.preset == "agentx"
    assert spec.duration_min == 30.0 and spec.window == (0.0, 30.0)
    assert spec.gap_cap_s == NO_GAP_CAP_S
    assert spec.start_range == (0.0, 1.0)
    assert (spec.start_at, spec.recycle_start) == ("time", "first")
    cfg = spec.config()
    assert (cfg.start_lo, cfg.start_hi, cfg.start_at, cfg.recycle_start) == (
        0.0,
        1.0,
        "time",
        "first",
    )
    assert "0-30" in used


def test_flags_and_the_config_file_win_over_the_preset() -> None:
    layers = [
        Layer(FLAGS, {"preset": "agentx", "duration_min": 6.0, "gap_cap_s": 60.0}),
        Layer("--config run.yaml", {"start_range": (0.25, 0.75), "seed": 4}),
        BASE,
    ]
    spec, _ = workload(layers)
    assert (spec.duration_min, spec.gap_cap_s, spec.seed) == (6.0, 60.0, 4)
    assert spec.start_range == (0.25, 0.75)
    # The preset's window is the whole run, whatever duration the user chose...
    assert spec.window == (0.0, 6.0)
    # ...unless the user names one.
    spec, _ = workload([Layer(FLAGS, {"preset": "agentx", "window": (2.0, 30.0)}), BASE])
    assert spec.window == (2.0, 30.0)


def test_the_preset_goes_under_the_users_layers_and_over_the_base() -> None:
    embedded = Layer("configs/workloads/default.yaml", {"sessions": 37, "duration_min": 45.0})
    spec, _ = workload([Layer(FLAGS, {"preset": "agentx"}), embedded])
    assert (spec.sessions, spec.duration_min) == (37, 30.0)


def test_a_preset_from_the_config_file_applies_too() -> None:
    spec, _ = workload([Layer(FLAGS, {}), Layer("--config c.yaml", {"preset": "agentx"}), BASE])
    assert spec.preset == "agentx" and spec.duration_min == 30.0


def test_an_unknown_preset_names_the_flag_and_the_choices() -> None:
    with pytest.raises(SpecError, match=r"--preset nope: unknown preset; choose one of agentx"):
        workload([Layer(FLAGS, {"preset": "nope"}), BASE])
    with pytest.raises(SpecError) as e:
        sweep_workload({"preset": "nope"}, [4], "trace")
    assert "--preset" in str(e.value) and ", ".join(PRESETS) in str(e.value)


def test_a_bad_value_over_the_preset_names_its_flag() -> None:
    with pytest.raises(SpecError, match=r"--start-range"):
        workload([Layer(FLAGS, {"preset": "agentx", "start_range": "0.8-0.2"}), BASE])
    with pytest.raises(SpecError, match=r"--start-at"):
        workload([Layer(FLAGS, {"preset": "agentx", "start_at": "soon"}), BASE])


def test_a_run_stores_the_preset_in_its_spec_and_says_so() -> None:
    flags = RunFlags(
        engines="vllm",
        endpoint=["vllm=http://127.0.0.1:9"],
        workload={"preset": "agentx", "sessions": 4},
    )
    res = resolve_new(flags)
    wl = stored(res.spec)["workload"]
    assert wl["preset"] == "agentx" and wl["start_at"] == "time"
    assert wl["duration_min"] == 30.0 and wl["sessions"] == 4
    assert any("workload preset agentx" in n for n in res.notes)
    assert any("system idle cap not applied" in n for n in res.notes)
    # Without a preset the spec keeps its old shape (no new keys).
    plain = stored(resolve_new(RunFlags(engines="vllm", endpoint=["vllm=http://h:1"])).spec)
    assert not {"preset", "start_range", "start_at", "recycle_start"} & set(plain["workload"])


def test_notes_say_what_is_not_applied_and_a_short_run() -> None:
    notes = preset_notes("agentx", 6.0)
    assert notes[0].startswith("workload preset agentx: aiperf 0.13.0")
    for rule in AGENTX.not_applied():
        assert any(rule.name in n for n in notes)
    assert any("below its 15-minute floor" in n for n in notes)
    assert not any("floor" in n for n in preset_notes("agentx", 30.0))


def test_every_rule_cites_its_source() -> None:
    for rule in AGENTX.rules:
        assert ".py:" in rule.source, rule.name
        assert rule.theirs and rule.ours


def _traj(tid: str, times: list[float]) -> Trajectory:
    n = len(times)
    return Trajectory(
        id=tid,
        block_size=64,
        hash_scope="local",
        namespace=tid,
        t=np.asarray(times, dtype=np.float64),
        input_tokens=np.full(n, 1000, np.int64),
        output_tokens=np.full(n, 10, np.int64),
        api_time=np.full(n, 1.0),
        think_time=np.full(n, np.nan),
        ttft=np.full(n, np.nan),
        request_type=np.zeros(n, np.int8),
        stop=np.zeros(n, np.int8),
        hash_offsets=np.zeros(n + 1, np.int64),
        hash_ids=np.zeros(0, np.int64),
    )


def test_start_at_time_takes_the_first_request_after_the_instant() -> None:
    # Nine requests in the first 10 s, one at 1,000 s: by time, most starts fall on the last.
    tr = _traj("a", [*range(9), 1000.0])
    assert start_at_time(tr, 0.0) == 0
    assert start_at_time(tr, 0.005) == 5  # t* = 5 s
    assert start_at_time(tr, 0.5) == 9
    assert start_at_time(tr, 1.0) == 9


def test_recycled_trajectories_start_at_their_first_request() -> None:
    trace = Trace([_traj(f"t{i}", [float(j) for j in range(10)]) for i in range(3)], "mem",
                  "weka", 64)  # fmt: skip
    cfg = WorkloadConfig(sessions=2, start_at="time", recycle_start="first")
    wl = Workload(trace, cfg)
    assert all(wl.assignment(s, k).start == 0 for s in range(2) for k in range(1, 4))
    plain = Workload(trace, WorkloadConfig(sessions=2))
    assert any(plain.assignment(s, k).start > 0 for s in range(2) for k in range(1, 4))


def test_simulate_preset_on_a_small_trace(small_trace: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from replay.cli import app
    from replay.rundir import read_manifest, read_summary

    out = tmp_path / "sim"
    res = CliRunner().invoke(
        app,
        [
            "simulate",
            "--preset",
            "agentx",
            "--trace",
            str(small_trace),
            "--policies",
            "vllm",
            "--sessions",
            "3",
            "--duration-min",
            "8",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "workload preset agentx" in res.output
    man = read_manifest(out / "vllm-s3-seed0")
    assert man.spec is not None and man.spec["workload"]["preset"] == "agentx"
    assert man.config.window == (0.0, 480.0)
    assert (man.config.start_at, man.config.recycle_start) == ("time", "first")
    summary = read_summary(out / "vllm-s3-seed0")
    assert summary is not None
    assert any("workload preset agentx" in n for n in summary.notes)
    assert any("below its 15-minute floor" in n for n in summary.notes)
    bad = CliRunner().invoke(app, ["simulate", "--preset", "agentz", "--policies", "vllm"])
    assert bad.exit_code != 0 and "--preset agentz: unknown preset; choose one of agentx" in (
        bad.output
    )


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from replay.traces.synth import SynthConfig, write_synth

    path = tmp_path_factory.mktemp("preset-corpus") / "small.jsonl"
    write_synth(path, SynthConfig(n_trajectories=4, seed=2, scale=16))
    return path
