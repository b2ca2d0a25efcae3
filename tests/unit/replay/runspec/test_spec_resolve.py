"""The run spec: each field's flag is the command line's, the layers stack (flags over the config
file over the base), a refused value is named from the error's location (its flag, or its file
and field), and a stored spec validates back to the same spec (what --resume reads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import replay.client.orchestrate as orchestrate
from replay.cli import app
from replay.runspec.fields import EngineShape, LimitsSpec, WorkloadSpec, flag_of
from replay.runspec.live import RunFlags, resolve_new, stored
from replay.runspec.model import RunSpec
from replay.runspec.resolve import FLAGS, Layer, SpecError, build, workload

CAPTURED = 7


def test_every_field_declares_its_flag_and_the_commands_take_it() -> None:
    for model in (WorkloadSpec, LimitsSpec, EngineShape):
        for key, info in model.model_fields.items():
            flag = flag_of(info)
            assert flag is not None and flag.startswith("--"), f"{model.__name__}.{key}"
    # run and simulate declare their workload options from the same fields.
    run_help = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output
    sim_help = CliRunner().invoke(app, ["simulate", "--help"], env={"COLUMNS": "200"}).output
    for key in WorkloadSpec.model_fields:
        flag = flag_of(WorkloadSpec.model_fields[key])
        assert flag in run_help, flag
        if key != "time_scale":  # a simulation runs on a virtual clock
            assert flag in sim_help, flag


def test_flags_win_over_the_file_over_the_base() -> None:
    layers = [
        Layer(FLAGS, {"sessions": 8, "seed": None}),
        Layer("--config c.yaml", {"sessions": 4, "seed": 3, "gap_cap_s": 60.0}),
        Layer("base", {"seed": 9, "gap_cap_s": 1.0, "duration_min": 6.0}),
    ]
    spec, used = workload(layers)
    assert (spec.sessions, spec.seed, spec.gap_cap_s, spec.duration_min) == (8, 3, 60.0, 6.0)
    assert spec.window == (2.0, 6.0) and "last two thirds of the 6-minute run" in used


@pytest.mark.parametrize(
    ("layers", "message"),
    [
        ([Layer(FLAGS, {"sessions": 0})], "--sessions 0: must be at least 1"),
        ([Layer(FLAGS, {"gap_cap_s": -1.0})], "--gap-cap-s -1: must be 0 or more"),
        ([Layer(FLAGS, {"time_scale": float("nan")})], "--time-scale nan: must be a finite"),
        ([Layer(FLAGS, {"warmup_s": -2.0})], "--warmup-s -2: must be 0 or more"),
        # Issue 36: past 64 bits, or a duration that overflows the run's clocks.
        (
            [Layer(FLAGS, {"seed": 10**23})],
            "--seed 100000000000000000000000: must be at most 9223372036854775807 (2^63 - 1",
        ),
        (
            [Layer("--config c.yaml", {"seed": 2**63})],
            "--config c.yaml: field 'seed' 9223372036854775808: must be at most",
        ),
        (
            [Layer(FLAGS, {"duration_min": 1e300})],
            "--duration-min 1e+300: must be at most 525600 (a year of the trace's clock)",
        ),
        # A scale whose run would outlast the duration's own bound (it ran until killed).
        (
            [Layer(FLAGS, {"duration_min": 1.0, "time_scale": 1e-9})],
            "--time-scale 1e-09: a 1-minute run would take 1e+09 minutes of wall time, over a "
            "year (525,600 minutes); give at least 1.9e-06",
        ),
        (
            [Layer("--config c.yaml", {"time_scale": 1e-9})],
            "--config c.yaml: field 'time_scale' 1e-09: a 45-minute run",
        ),
        (
            [Layer(FLAGS, {}), Layer("--config c.yaml", {"sessions": -3})],
            "--config c.yaml: field 'sessions' -3: must be at least 1",
        ),
        (
            [Layer(FLAGS, {"subagents": "parallel"})],
            "subagents must be one of concurrent, inline, skip (got 'parallel') (check --subagents)",
        ),
        (
            [Layer(FLAGS, {"duration_min": 1.0, "warmup_s": 90.0})],
            "warm-up must lie within the run: 0 ≤ 90 < 60 s (check --warmup-s)",
        ),
        (
            [Layer(FLAGS, {"window": "1-9", "duration_min": 5.0})],
            "--window 1-9 ends after the run (--duration-min 5)",
        ),
    ],
)
def test_a_refused_value_is_named_by_where_it_came_from(layers: list[Layer], message: str) -> None:
    with pytest.raises(SpecError) as e:
        workload(layers)
    assert message in str(e.value)


def test_limits_are_named_by_their_flags() -> None:
    with pytest.raises(SpecError, match="--stall-timeout-s 0: must be positive"):
        build(LimitsSpec, [Layer(FLAGS, {"stall_timeout_s": 0.0})])
    assert build(LimitsSpec, [Layer(FLAGS, {"retries": None})]).retries == 3


def test_the_embedded_default_window_belongs_to_its_duration() -> None:
    spec = resolve_new(RunFlags()).spec  # no endpoint: the embedded default
    assert spec.emulated and spec.workload.window == (15.0, 45.0)
    assert spec.workload.time_scale == 30
    other = resolve_new(RunFlags(workload={"duration_min": 9.0})).spec
    assert other.workload.window == (3.0, 9.0)  # the last two thirds of that run


def test_a_cut_warm_up_is_what_the_spec_holds() -> None:
    """`replay run` cuts a warm-up longer than half a short run: the spec (what its manifest
    stores, and --resume reads) holds the warm-up replayed, not the one asked for."""
    spec, _ = workload([Layer(FLAGS, {"duration_min": 1.0, "warmup_s": 120.0})], clamp_warmup=True)
    assert spec.warmup_s == 30.0 and spec.config(clamp_warmup=True).warmup_s == 30.0
    kept, _ = workload([Layer(FLAGS, {"duration_min": 1.0, "warmup_s": 20.0})], clamp_warmup=True)
    assert kept.warmup_s == 20.0


def test_a_stored_spec_validates_back_without_its_credentials() -> None:
    flags = RunFlags(endpoint=["vllm=http://user:secret@127.0.0.1:9"], workload={"seed": 5})
    spec = resolve_new(flags).spec
    kept = stored(spec)
    assert "secret" not in str(kept)
    again = RunSpec.model_validate(kept)
    assert again.workload == spec.workload and again.limits == spec.limits
    assert again.engines[0].engine.url == "http://***@127.0.0.1:9"


def test_replay_run_hands_the_spec_to_its_plan(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    def capture(**kwargs: Any) -> None:
        seen.update(kwargs)
        raise typer.Exit(CAPTURED)

    monkeypatch.setattr(orchestrate, "RunPlan", capture)  # `replay run` imports it when used
    res = CliRunner().invoke(
        app,
        ["run", "--endpoint", "vllm=http://127.0.0.1:9", "--warmup-s", "30", "--gap-cap-s", "60",
         "--sessions", "3", "--out", str(tmp_path / "r"), "--no-panel"],
    )  # fmt: skip
    assert res.exit_code == CAPTURED, res.output
    assert (seen["workload"].warmup_s, seen["workload"].gap_cap_s) == (30.0, 60.0)
    spec = RunSpec.model_validate(seen["spec"])
    assert spec.workload.sessions == 3 and spec.engines[0].executor == "live"


def test_resume_without_a_stored_spec_is_refused(tmp_path: Path) -> None:
    from replay.rundir import RunWriter
    from replay.rundir_models import Manifest

    run_dir = tmp_path / "old"
    with RunWriter(run_dir, Manifest.model_validate({"engines": [{"name": "a"}]})) as w:
        w.add({"engine": "a", "session": 0, "turn": 0, "prompt_tokens": 1, "status": "ok"})
    man = run_dir / "manifest.json"
    man.write_text(man.read_text().replace('"completed"', '"interrupted"'))
    res = CliRunner().invoke(app, ["run", "--resume", str(run_dir), "--no-panel"])
    assert res.exit_code == 2
    assert "manifest.json lacks the run's spec" in " ".join(res.output.split())


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("sessions: 0", "field 'sessions' 0: must be at least 1"),
        ("sessions: lots", "field 'sessions' lots: Input should be a valid integer"),
        ("warmup_s: -1", "field 'warmup_s' -1: must be 0 or more"),
        ("colour: red", "field 'colour': not a setting (known: engines, slo, trace, sessions"),
    ],
)
def test_a_config_files_workload_is_checked_by_the_spec(
    tmp_path: Path, line: str, message: str
) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"engines: [{{name: vllm, url: 'http://127.0.0.1:9'}}]\n{line}\n")
    res = CliRunner().invoke(app, ["run", "--config", str(cfg), "--no-panel"])
    assert res.exit_code == 2
    assert f"--config {cfg}: {message}" in " ".join(res.output.split()), res.output


def test_the_router_is_checked_on_its_field() -> None:
    """One check of a router's name (issue 33): `EngineShape.router`, for run and simulate."""
    from replay.fleet import router_names

    assert EngineShape(router="external").router == "external"
    assert {EngineShape(router=r).router for r in router_names()} == set(router_names())
    with pytest.raises(SpecError, match=r"^--router best: unknown router; choose one of round_"):
        build(EngineShape, [Layer(FLAGS, {"router": "best"})])
