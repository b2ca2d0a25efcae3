"""`replay run` from the command line against a real local engine (served from a thread):
a run writes its directory and prints the side-by-side table; bad input and a failing
preflight stop it with a message saying what to change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.rundir import read_manifest, read_requests


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["run", *args], catch_exceptions=False)


def test_replay_run_writes_the_run_directory(
    engine_thread: Any, helpers: Any, tmp_path: Path
) -> None:
    trace = helpers.write_weka(tmp_path / "t.jsonl", sessions=2, turns=4)
    out = tmp_path / "run"
    res = run(
        "--endpoint",
        f"vllm={engine_thread.url}",
        "--trace",
        trace,
        "--sessions",
        "2",
        "--duration-min",
        "0.02",
        "--window",
        "0-0.02",
        "--out",
        str(out),
        "--no-panel",
    )
    assert res.exit_code == 0, res.output
    assert "hit rate" in res.output and "run directory" in res.output
    man = read_manifest(out)
    assert man.status == "completed"
    assert man.config.sessions == 2 and man.config.window == (0.0, 1.2)
    assert man.trace.sha256 and man.engines[0].url == engine_thread.url
    assert "api_key" not in man.model_dump_json().lower()
    df = read_requests(out)
    assert len(df) > 5 and set(df.engine) == {"vllm"}
    assert (out / "summary.json").exists() and (out / "server_metrics.parquet").exists()
    res = run("--endpoint", f"vllm={engine_thread.url}", "--trace", trace, "--out", str(out))
    assert res.exit_code == 2 and "already holds a run" in res.output


def test_config_file_engines(engine_thread: Any, helpers: Any, tmp_path: Path) -> None:
    trace = helpers.write_weka(tmp_path / "t.jsonl", sessions=2, turns=4)
    cfg = tmp_path / "engines.yaml"
    cfg.write_text(
        "engines:\n"
        f"  - {{name: base, kind: vllm, url: '{engine_thread.url}', gpus: 2, gpu_type: B200}}\n"
        "sessions: 1\nduration_min: 0.01\nwindow: 0-0.01\n"
    )
    res = run("--config", str(cfg), "--trace", trace, "--out", str(tmp_path / "r"), "--no-panel")
    assert res.exit_code == 0, res.output
    (eng,) = read_manifest(tmp_path / "r").engines
    assert (eng.name, eng.gpus, eng.gpu_type) == ("base", 2, "B200")


def test_failing_preflight_stops_before_the_run(
    engine_thread: Any, helpers: Any, tmp_path: Path
) -> None:
    engine_thread.report_cached = False
    trace = helpers.write_weka(tmp_path / "t.jsonl")
    res = run(
        "--endpoint",
        f"vllm={engine_thread.url}",
        "--trace",
        trace,
        "--out",
        str(tmp_path / "r"),
        "--no-panel",
    )
    assert res.exit_code == 2
    assert "--enable-prompt-tokens-details" in res.output
    assert "nothing was sent" in res.output
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--endpoint", "vllm"], "expected NAME=URL"),
        (["--endpoint", "vllm=http://127.0.0.1:9", "--window", "50-40"], "--window"),
        (
            ["--endpoint", "vllm=http://127.0.0.1:9", "--window", "10-20", "--duration-min", "5"],
            "window",
        ),
        (["--endpoint", "vllm=http://127.0.0.1:9", "--trace", "/nonexistent.jsonl"], "--trace"),
        (["--endpoint", "vllm=http://127.0.0.1:9", "--sessions", "0"], "sessions"),
        (["--resume", "/nonexistent-run"], "--resume"),
        (["--endpoint", "vllm=http://127.0.0.1:9", "--time-scale", "-2"], "--time-scale"),
        (["--config", "x.yaml", "--engines", "vllm"], "--config lists the engines"),
        (["--config", "/nonexistent.yaml"], "--config /nonexistent.yaml: file not found"),
        (
            ["--endpoint", "vllm=http://127.0.0.1:9", "--subagents", "parallel"],
            "subagents must be one of concurrent, inline, skip (got 'parallel') (check --subagents)",
        ),
        (
            ["--endpoint", "vllm=http://127.0.0.1:9", "--token-scale", "8"],
            "--token-scale 8 contradicts trace",
        ),
    ],
)
def test_bad_input_is_named(args: list[str], message: str, tmp_path: Path) -> None:
    res = run(*args, "--no-panel")
    assert res.exit_code == 2, res.output
    assert message in res.output


def test_unreachable_endpoint_fails_preflight_with_the_url(helpers: Any, tmp_path: Path) -> None:
    trace = helpers.write_weka(tmp_path / "t.jsonl")
    res = run(
        "--endpoint",
        "vllm=http://127.0.0.1:9",
        "--trace",
        trace,
        "--no-panel",
        "--out",
        str(tmp_path / "r"),
    )
    assert res.exit_code == 2
    assert "fix the URL http://127.0.0.1:9" in res.output


def test_resume_refuses_a_completed_run(engine_thread: Any, helpers: Any, tmp_path: Path) -> None:
    trace = helpers.write_weka(tmp_path / "t.jsonl", sessions=1, turns=3)
    out = tmp_path / "run"
    res = run(
        "--endpoint",
        f"vllm={engine_thread.url}",
        "--trace",
        trace,
        "--sessions",
        "1",
        "--duration-min",
        "0.01",
        "--window",
        "0-0.01",
        "--out",
        str(out),
        "--no-panel",
    )
    assert res.exit_code == 0, res.output
    res = run("--resume", str(out), "--no-panel")
    assert res.exit_code == 2 and "that run completed; nothing to resume" in res.output


@pytest.mark.slow  # a real subprocess: imports, preflight, a signal (~10 s on 2 busy cores)
def test_ctrl_c_stops_cleanly_and_keeps_everything(
    engine_thread: Any, helpers: Any, tmp_path: Path
) -> None:
    import signal
    import subprocess
    import sys
    import time

    trace = helpers.write_weka(tmp_path / "t.jsonl", sessions=2, turns=5)
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "replay",
        "run",
        "--endpoint",
        f"vllm={engine_thread.url}",
        "--trace",
        trace,
        "--sessions",
        "2",
        "--duration-min",
        "5",
        "--window",
        "0-5",
        "--out",
        str(out),
        "--no-panel",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (out / "requests.jsonl").exists() or (out / "requests.jsonl").stat().st_size == 0:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    assert "replay run --resume" in stdout
    assert read_manifest(out).status == "interrupted"
    assert (out / "summary.json").exists() and len(read_requests(out)) > 0


@pytest.mark.slow  # starts an emulator process (~5 s on 2 busy cores)
def test_no_endpoint_starts_an_emulator_per_engine(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = run(
        "--engines",
        "vllm",
        "--sessions",
        "2",
        "--duration-min",
        "0.5",
        "--window",
        "0-0.5",
        "--out",
        str(out),
        "--no-panel",
    )
    assert res.exit_code == 0, res.output
    man = read_manifest(out)
    assert man.emulated is True and man.status == "completed"
    assert man.engines[0].url.startswith("http://127.0.0.1:")
    assert man.config.clock_scale == man.config.time_scale == 30.0
    # the emulators stand for GLM-5.3-Flash on 2×B200 replaying the 1/16-size sample
    assert (man.engines[0].gpus, man.engines[0].gpu_type) == (2, "B200")
    assert man.config.token_scale == 16.0
    # the sample's own scale, the subagent mode, and no trajectory replayed twice
    assert man.trace.token_scale == 16.0 and man.config.subagents == "concurrent"
    assert man.workload.reused_assignments == {"vllm": 0}
    assert man.workload.trajectories == 240
    assert len(read_requests(out)) > 0


@pytest.mark.parametrize(
    ("slo", "message"),
    [
        ("latency=3", "--slo 'latency=3': expected KEY=VALUE with KEY one of ttft, e2e, itl"),
        ("ttft=soon", "--slo 'ttft=soon': ttft must be a number or none"),
        ("itl=0", "--slo: field 'itl_s'"),
    ],
)
def test_bad_slo_is_named(slo: str, message: str) -> None:
    res = run("--endpoint", "vllm=http://127.0.0.1:9", "--slo", slo, "--no-panel")
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split())


def test_bad_slo_in_the_config_file_names_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "engines.yaml"
    cfg.write_text("engines:\n  - {name: vllm, url: 'http://127.0.0.1:9'}\nslo: {ttft_s: -1}\n")
    res = run("--config", str(cfg), "--no-panel")
    assert res.exit_code == 2, res.output
    assert f"--config {cfg}: slo: field 'ttft_s'" in " ".join(res.output.split())


def test_slo_is_recorded_and_shown(engine_thread: Any, helpers: Any, tmp_path: Path) -> None:
    trace = helpers.write_weka(tmp_path / "t.jsonl", sessions=2, turns=4)
    out = tmp_path / "run"
    res = run(
        "--endpoint", f"vllm={engine_thread.url}", "--trace", trace, "--sessions", "2",
        "--duration-min", "0.02", "--window", "0-0.02", "--out", str(out), "--no-panel",
        "--slo", "ttft=1.5,slowdown=none",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    slo = read_manifest(out).config.slo
    assert slo == {"ttft_s": 1.5, "e2e_s": None, "itl_s": 0.175, "task_slowdown": None}
    for row in ("saturated", "task latency p50 s", "SLO requests", "goodput out tok/min/GPU"):
        assert row in res.output
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["engines"]["vllm"]["slo"]["source"] == "manifest"


def test_a_default_file_scale_that_contradicts_the_sample_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The trace is the source of truth: `token_scale` in configs/workloads/default.yaml
    must agree with the sample's own, and with --token-scale."""
    import typer

    from replay.commands.run import _trace_scale
    from replay.emulator.defaults import load_default_run
    from replay.traces import load_trace, sample_path

    shipped = load_default_run()

    def with_scale(scale: float) -> object:
        return shipped.model_copy(update={"token_scale": scale})

    sample = load_trace(sample_path())
    assert _trace_scale(sample, None, with_scale(16), True) == 16
    assert _trace_scale(sample, None, shipped, True) == 16
    with pytest.raises(typer.Exit):
        _trace_scale(sample, None, with_scale(8), True)
    assert "token_scale (configs/workloads/default.yaml) 8 contradicts trace" in " ".join(
        capsys.readouterr().err.split()
    )
    with pytest.raises(typer.Exit):
        _trace_scale(sample, 8, with_scale(16), True)
    assert "--token-scale 8 contradicts token_scale 16" in " ".join(capsys.readouterr().err.split())


def _outcome(engines: dict[str, Any], tmp_path: Path) -> Any:
    from replay.client.orchestrate import RunOutcome

    return RunOutcome(tmp_path, "completed", {"engines": engines}, 1, [], {})


_MEASURED = {
    "gpus": 2,
    "hit_rate": 0.87,
    "prefill_tokens_per_min_per_gpu": 4.74e6,
    "output_tokens_per_min_per_gpu": 30_850.0,
}


def test_final_table_prices_through_the_one_pricing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's final table prices each engine at its own GPU (analysis.economics); a GPU
    with no rate blanks the price rows with a note naming it and --gpu; any other error is a
    bug and propagates (no blanket suppression: a stand-in that raises checks that)."""
    from rich.console import Console

    import analysis.economics
    from replay.commands import final_table as run_cmd

    def rendered(engines: dict[str, Any]) -> str:
        console = Console(width=200, record=True)
        console.print(run_cmd.final_table(_outcome(engines, tmp_path)))
        return console.export_text()

    assert "5.29" in rendered({"fs": {**_MEASURED, "gpu_type": "B200"}})  # the demo's profit
    err = Console(width=300, record=True)
    monkeypatch.setattr(run_cmd, "err_console", err)
    text = rendered({"fs": {**_MEASURED, "gpu_type": "TPU9"}})
    note = err.export_text()
    assert "not priced: engine 'fs' runs on GPU 'TPU9'" in note and "--gpu" in note
    assert "5.29" not in text

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in pricing")

    monkeypatch.setattr(analysis.economics, "engine_economics", broken)
    with pytest.raises(RuntimeError, match="a bug in pricing"):
        rendered({"fs": {**_MEASURED, "gpu_type": "B200"}})
