"""Results that say what they are, on real emulated runs over HTTP: each verdict in both
outcomes. An emulator limited to one running request (`--max-batch 1`) under 16 sessions
must be flagged saturated and miss the SLO; 2 sessions against a plain emulator must not.
An emulator that ends half its generations early (`--early-stop-rate 0.5`) drifts; the plain
one does not. Replaying the same salted workload again against the same emulators starts
warm: preflight warns and the first minutes hit prefixes the run never computed."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analysis.slo import Slo
from analysis.summary import summary_of_dir
from replay.cli import app
from replay.client.config import EngineSpec
from replay.client.orchestrate import RunOutcome, RunPlan, run_live
from replay.emulator.config import EmulatorConfig, FaultConfig
from replay.emulator.launch import start_emulators
from replay.traces import load_trace
from replay.traces.model import Trace
from replay.traces.synth import Knobs, SynthConfig, write_synth
from replay.workload import WorkloadConfig

pytestmark = pytest.mark.slow

X = 60.0  # emulators and workload run 60x faster than the modelled GPU: 8 minutes in 8 s
MINUTES = 8.0


def _emulator(**kw: Any) -> EmulatorConfig:
    return EmulatorConfig(engine="vllm", port=0, time_scale=X, token_scale=16, **kw)


def _short_trace(path: Path) -> Trace:
    """Short agent tasks with short tool gaps (the synthesizer before its pressure
    calibration, and ~12 turns a task), so tasks finish inside an 8-minute run and 16
    sessions keep a one-request engine busy."""
    knobs = Knobs(top_turns=(12.0, 0.4), sub_turns=(4.0, 0.4), tool_gap=(2.0, 2.0))
    write_synth(path, SynthConfig(n_trajectories=60, seed=0, scale=16), knobs=knobs)
    return load_trace(path)


def _plan(
    specs: list[EngineSpec], trace: Trace, sessions: int, out: Path, salt: int | None
) -> RunPlan:
    return RunPlan(
        engines=specs,
        trace=trace,
        workload=WorkloadConfig(
            sessions=sessions, duration_s=MINUTES * 60, window=(120.0, MINUTES * 60), seed=0
        ),
        out_dir=out,
        time_scale=X,
        clock_scale=X,  # records in the modelled clock, as `replay run` does for emulators
        summarize=summary_of_dir,
        slo=Slo().model_dump(),  # `replay run` states the SLO in every manifest
        salt=salt,
        scrape_interval_s=1.0,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, RunOutcome]]:
    root = tmp_path_factory.mktemp("verdicts")
    trace = _short_trace(root / "short.jsonl")
    configs = {
        "busy": _emulator(max_batch=1),
        "plain": _emulator(),
        "eos": _emulator(faults=FaultConfig(early_stop_rate=0.5)),
    }
    with contextlib.ExitStack() as stack:
        urls = {n: stack.enter_context(start_emulators([c]))["vllm"] for n, c in configs.items()}
        busy = [EngineSpec(name="busy", kind="vllm", url=urls["busy"])]
        light = [EngineSpec(name=n, kind="vllm", url=urls[n]) for n in ("plain", "eos")]
        out = {
            "busy": asyncio.run(run_live(_plan(busy, trace, 16, root / "busy", None))),
            "light": asyncio.run(run_live(_plan(light, trace, 2, root / "light", 7))),
            # Same salt, same emulators: every prompt of the first run is cached already.
            "warm": asyncio.run(run_live(_plan(light, trace, 2, root / "warm", 7))),
        }
    yield out


def _engine(outcome: RunOutcome, name: str) -> dict[str, Any]:
    summary = json.loads((outcome.run_dir / "summary.json").read_text())
    engine: dict[str, Any] = summary["engines"][name]
    return engine


def test_an_engine_that_cannot_keep_up_is_flagged(runs: dict[str, RunOutcome]) -> None:
    busy = _engine(runs["busy"], "busy")
    assert busy["saturated"] is True
    ev = busy["saturation"]
    assert ev["source"] == "engine queue" and ev["queue"]["busy_share"] >= 0.5
    assert ev["reasons"] and "queue" in ev["reasons"][0]
    assert {"slope", "slope_se", "growth_s"} <= set(ev["ttft_trend"])
    notes = json.loads((runs["busy"].run_dir / "summary.json").read_text())["notes"]
    assert any("busy: SATURATED" in n for n in notes)


def test_a_light_run_is_not_flagged(runs: dict[str, RunOutcome]) -> None:
    for name in ("plain", "eos"):
        e = _engine(runs["light"], name)
        assert e["saturated"] is False, e["saturation"]
        assert e["saturation"]["verdict"] == "kept up"


def test_slo_shares_and_goodput_both_ways(runs: dict[str, RunOutcome]) -> None:
    busy, plain = _engine(runs["busy"], "busy"), _engine(runs["light"], "plain")
    assert busy["slo"]["ttft_s"] == 6.0 and busy["slo"]["source"] == "manifest"
    assert busy["slo_request_share"] < 0.1  # queued for tens of seconds: outside the SLO
    assert busy["goodput_output_tokens_per_min_per_gpu"] < (
        0.1 * busy["output_tokens_per_min_per_gpu"]
    )
    assert plain["slo_request_share"] > 0.6
    assert (
        0
        < plain["goodput_output_tokens_per_min_per_gpu"]
        <= (plain["output_tokens_per_min_per_gpu"])
    )
    assert busy["profit_per_gpu_hour_at_goodput"] < plain["profit_per_gpu_hour_at_goodput"]


def test_agent_tasks_are_measured(runs: dict[str, RunOutcome]) -> None:
    plain = _engine(runs["light"], "plain")
    assert plain["tasks_finished"] >= 1
    assert (
        plain["task_latency_p50_s"] > 0
        and plain["task_latency_p90_s"] >= (plain["task_latency_p50_s"])
    )
    # The sample's outputs are 16x shorter than the trace's, so its tasks run faster than
    # recorded; the slowdown is still a finite ratio against the trace's own duration.
    assert 0 < plain["task_slowdown_p50"] < 2
    assert plain["slo_task_share"] == 1.0
    assert plain["user_cost_per_task"] > 0


def test_drift_and_none(runs: dict[str, RunOutcome]) -> None:
    plain = _engine(runs["light"], "plain")["drift"]
    eos = _engine(runs["light"], "eos")["drift"]
    assert plain["flagged"] is False and plain["output_mismatches"] == 0
    assert plain["continuation_turns"] > 0 and plain["continuation_exact_share"] == 1.0
    assert plain["prompt_mismatches"] == 0 and plain["prompt_compared"] > 0
    assert eos["flagged"] is True
    manifest = json.loads((runs["light"].run_dir / "manifest.json").read_text())
    assert manifest["replay_fidelity"]["eos"]["drift"]["flagged"] is True
    assert manifest["replay_fidelity"]["plain"]["drift"]["output_mismatches"] == 0
    assert 0.2 < eos["output_mismatch_share"] < 0.8
    assert "outputs differ in length" in eos["reasons"][0]


def test_warm_and_cold_cache(runs: dict[str, RunOutcome]) -> None:
    cold = _engine(runs["light"], "plain")
    warm = _engine(runs["warm"], "plain")
    assert cold["warm_start_flagged"] is False and cold["warm_start_excess_hit_rate"] == 0
    assert warm["warm_start_flagged"] is True
    assert warm["warm_start_excess_hit_rate"] > 0.01
    first = json.loads((runs["light"].run_dir / "manifest.json").read_text())
    again = json.loads((runs["warm"].run_dir / "manifest.json").read_text())
    assert first["engines"][0]["preflight"]["cold cache"] is True
    assert first["engines"][0]["preflight_warnings"] == []
    assert again["engines"][0]["preflight"]["cold cache"] is False
    assert "earlier traffic" in again["engines"][0]["preflight_warnings"][0]
    assert again["config"]["salt"] == 7


def test_report_and_price_show_the_verdicts(runs: dict[str, RunOutcome], tmp_path: Path) -> None:
    from analysis.report.build import build_report

    build_report([runs["busy"].run_dir], tmp_path / "rep", "md", figures=False)
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "busy: SATURATED" in md
    assert "Replay fidelity" in md and "Agent tasks, SLOs and goodput" in md
    result = CliRunner().invoke(app, ["price", str(runs["light"].run_dir), "--json"])
    assert result.exit_code == 0, result.output
    engines = {e["engine"]: e for e in json.loads(result.output)["engines"]}
    assert engines["plain"]["user_cost_per_task"] > 0
    assert "profit_per_gpu_hour_at_goodput" in engines["plain"]
