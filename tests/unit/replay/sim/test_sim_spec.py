"""Every simulated run directory stores its point's spec (`replay.runspec.model.RunSpec`,
`Manifest.spec`), which reads back into the typed model and builds the same simulator config
(`replay.runspec.sweep.config_of`); the simulator's writers (`write_run`, `run_sweep`) take it
from every caller; `replay run --resume` refuses a simulated run by name."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from typer.testing import CliRunner

from analysis.runs import load_run
from replay.cli import app
from replay.rundir import read_manifest
from replay.runspec.model import RunSpec
from replay.runspec.sweep import config_of, manifest_spec, spec_of
from replay.sim.fleet import FleetConfig
from replay.sim.runner import SimConfig, simulate, write_run
from replay.sim.sweep import run_sweep
from replay.traces import load_trace

runner = CliRunner()
SHORT = ["--duration-min", "6", "--window", "2-6", "--seed", "3"]


@pytest.fixture(scope="module")
def sweep(small_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("spec") / "sweep"
    res = runner.invoke(
        app,
        ["simulate", "--trace", str(small_corpus), "--policies", "vllm", "--sessions", "2",
         "--replicas", "2", "--router", "session_hash", "--capacity-blocks", "900",
         "--timing", "engine", "--out", str(out), *SHORT],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    return out


def test_a_simulated_manifest_stores_its_points_spec(sweep: Path, small_corpus: Path) -> None:
    run_dir = sweep / "vllm-r2-session_hash-s2-seed3"
    spec = RunSpec.model_validate(read_manifest(run_dir).spec)
    assert spec.simulated and not spec.emulated and not spec.sample
    (e,) = spec.engines
    assert (e.policy, e.timing, e.capacity_blocks) == ("vllm", "engine", 900)
    assert (e.replicas, e.router, e.engine.kind, e.engine.gpus) == (2, "session_hash", "sim", 2)
    w = spec.workload
    assert (w.trace, w.sessions, w.seed, w.duration_min, w.window) == (
        str(small_corpus),
        2,
        3,
        6.0,
        (2.0, 6.0),
    )
    assert w.token_scale == 16.0  # the corpus's own, as resolved
    cfg = config_of(spec)
    assert isinstance(cfg, FleetConfig) and cfg.run_name == run_dir.name
    assert spec_of(cfg, str(small_corpus)) == spec  # the config says the same spec back


@pytest.mark.parametrize(
    "cfg",
    [
        SimConfig(
            policy="sglang",
            sessions=4,
            seed=2,
            timing="engine",
            window=(30.0, 90.0),
            duration_s=90.0,
            policy_opts={"chunk": 128},
            engine_rules="x=1",
            admission="park",
            capacity_blocks=70,
            token_scale=4.0,
        ),
        FleetConfig(
            policy="vllm",
            sessions=3,
            replicas=3,
            router="least_load",
            router_opts={"k": 2},
            subagents="inline",
            gap_cap_s=30.0,
        ),
    ],
)
def test_a_config_builds_back_from_its_spec(cfg: SimConfig) -> None:
    spec = RunSpec.model_validate(manifest_spec(cfg, "t.jsonl"))
    assert config_of(spec) == cfg


def test_run_resume_refuses_a_simulated_run(sweep: Path) -> None:
    run_dir = sweep / "vllm-r2-session_hash-s2-seed3"
    res = runner.invoke(app, ["run", "--resume", str(run_dir)])
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert f"--resume {run_dir}: a simulated run (replay simulate), not a live one" in text
    # The command line it stored (pytest's own arguments here, none under xdist).
    assert "run its sweep again with a new --out: replay" in text


def test_the_simulators_writers_store_the_spec_they_are_given(
    small_corpus: Path, tmp_path: Path
) -> None:
    trace = load_trace(small_corpus)
    src = str(small_corpus)
    cfgs: list[SimConfig] = [
        SimConfig("vllm", 2, seed=3, timing="engine", duration_s=360.0, window=(120.0, 360.0)),
        FleetConfig(
            "sglang", 2, 1, duration_s=360.0, window=(0.0, 360.0), replicas=2, router="session_hash"
        ),
    ]
    with pytest.raises(TypeError, match="spec_of"):  # no manifest without its spec
        run_sweep(trace, cfgs, tmp_path / "none")  # type: ignore[call-arg]
    run_sweep(trace, cfgs, tmp_path / "sweep", spec_of=partial(manifest_spec, trace=src))
    res = simulate(trace, cfgs[0])
    with pytest.raises(TypeError, match="spec"):
        write_run(res, tmp_path / "none")  # type: ignore[call-arg]
    one = write_run(res, tmp_path / "one", spec=manifest_spec(cfgs[0], src))
    for cfg, run_dir in [*((c, tmp_path / "sweep" / c.run_name) for c in cfgs), (cfgs[0], one)]:
        man = read_manifest(run_dir)
        assert man.spec == manifest_spec(cfg, src)
        assert config_of(RunSpec.model_validate(man.spec)) == cfg  # reads back to its config
        assert load_run(run_dir).manifest.spec == man.spec  # the analysis reads it too
        res = runner.invoke(app, ["run", "--resume", str(run_dir)])
        assert res.exit_code == 2 and "a simulated run" in " ".join(res.output.split())
