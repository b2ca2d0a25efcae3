"""Run integrity from the command line (issue 12), against a real local engine over HTTP:
workload flags on --resume, negative counts, a repeated endpoint name, --out and --config
checked before anything starts, the window's unit and default, the clock an emulator
announces, secrets kept out of every file of a run, and an engine that went down."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from analysis.summary import summary_of_dir
from replay.cli import app
from replay.client.config import EngineSpec
from replay.client.orchestrate import RunPlan, run_live
from replay.rundir import read_manifest, read_requests
from replay.workload import WorkloadConfig


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["run", *args, "--no-panel"], catch_exceptions=False)


def _ok_run(engine: Any, trace: str, out: Path, *extra: str) -> Any:
    return run(
        "--endpoint", f"vllm={engine.url}", "--trace", trace, "--sessions", "1",
        "--out", str(out), *extra,
    )  # fmt: skip


@pytest.mark.parametrize(
    "flag", [["--sessions", "4"], ["--seed", "3"], ["--window", "1-2"], ["--trace", "x.jsonl"]]
)
def test_resume_refuses_flags_that_change_the_workload(flag: list[str], tmp_path: Path) -> None:
    res = run("--resume", str(tmp_path), *flag)
    assert res.exit_code == 2
    assert f"drop {flag[0]}" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--retries", "-1"], "--retries -1: must be 0 or more"),
        (["--sessions", "-3"], "--sessions -3: must be at least 1"),
        (["--duration-min", "-5"], "--duration-min -5: must be positive"),
        (["--gap-cap-s", "-1"], "--gap-cap-s -1: must be 0 or more"),
        (["--request-timeout-s", "0"], "--request-timeout-s 0: must be positive"),
        (["--stall-timeout-s", "-2"], "--stall-timeout-s -2: must be positive"),
    ],
)
def test_negative_counts_are_errors_naming_the_flag(args: list[str], message: str) -> None:
    res = run("--endpoint", "vllm=http://127.0.0.1:9", *args)
    assert res.exit_code == 2 and message in res.output, res.output


def test_a_repeated_endpoint_name_is_refused() -> None:
    res = run("--endpoint", "vllm=http://127.0.0.1:9", "--endpoint", "vllm=http://127.0.0.1:10")
    assert res.exit_code == 2
    assert "--endpoint vllm is given twice" in res.output


def test_out_that_cannot_be_a_run_directory_fails_before_anything_starts(
    helpers: Any, tmp_path: Path
) -> None:
    trace = helpers.write_weka(tmp_path / "t.jsonl")
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out, message in [
        (afile, f"--out {afile}: is a file, not a folder"),
        (afile / "run", f"{afile} is a file, not a folder"),
    ]:
        # The endpoint is unreachable: had preflight run first, it would have said so.
        res = run("--endpoint", "vllm=http://127.0.0.1:9", "--trace", trace, "--out", str(out))
        assert res.exit_code == 2 and message in res.output, res.output
        assert "preflight" not in res.output


def test_a_folder_or_a_binary_as_config_is_named(tmp_path: Path) -> None:
    binary = tmp_path / "engines.yaml"
    binary.write_bytes(b"\x7fELF\x00\x01\x02\xff\xfe")
    for path, message in [
        (tmp_path, "is a folder; give the YAML file inside it"),
        (binary, "is a binary file, not YAML text"),
    ]:
        res = run("--config", str(path))
        assert res.exit_code == 2 and f"--config {path}" in res.output and message in res.output


def test_without_a_window_the_last_two_thirds_of_the_run_are_measured(
    engine_thread: Any, helpers: Any, tmp_path: Path
) -> None:
    trace = helpers.write_weka(tmp_path / "t.jsonl", sessions=1, turns=3)
    res = _ok_run(engine_thread, trace, tmp_path / "r", "--duration-min", "0.03")
    assert res.exit_code == 0, res.output
    assert "measuring window 0.01-0.03 min (none given: the last two thirds" in res.output
    assert read_manifest(tmp_path / "r").config.window == pytest.approx([0.6, 1.8])


def test_a_window_after_the_run_names_both_flags(helpers: Any, tmp_path: Path) -> None:
    trace = helpers.write_weka(tmp_path / "t.jsonl")
    res = run(
        "--endpoint", "vllm=http://127.0.0.1:9", "--trace", trace,
        "--duration-min", "5", "--window", "15-45",
    )  # fmt: skip
    assert res.exit_code == 2
    assert "--window 15-45 ends after the run (--duration-min 5)" in res.output


def test_the_clock_an_emulator_announces_is_adopted(
    engine_thread: Any, helpers: Any, tmp_path: Path
) -> None:
    engine_thread.server_info = {"emulator": True, "time_scale": 30.0, "token_scale": 1}
    trace = helpers.write_weka(tmp_path / "t.jsonl", sessions=1, turns=3)
    res = _ok_run(engine_thread, trace, tmp_path / "r", "--duration-min", "0.6")
    assert res.exit_code == 0, res.output
    assert "announce time_scale 30" in res.output
    cfg = read_manifest(tmp_path / "r").config
    assert cfg.clock_scale == 30.0 and cfg.time_scale == 30.0
    assert cfg.duration_s == pytest.approx(36.0)  # the emulator's clock, not wall seconds


def test_a_clock_that_conflicts_with_time_scale_is_an_error(
    engine_thread: Any, helpers: Any, tmp_path: Path
) -> None:
    engine_thread.server_info = {"emulator": True, "time_scale": 30.0}
    trace = helpers.write_weka(tmp_path / "t.jsonl", sessions=1, turns=3)
    res = _ok_run(
        engine_thread, trace, tmp_path / "r", "--duration-min", "0.6", "--time-scale", "10"
    )
    assert res.exit_code == 2
    assert "--time-scale 10, but the engines announce time_scale 30" in res.output
    assert not (tmp_path / "r" / "requests.jsonl").exists()


@pytest.mark.parametrize("kind", ["openai", "vllm"])
def test_a_planted_key_reaches_no_file_of_the_run(
    kind: str, engine_thread: Any, helpers: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hosted endpoint's key (OPENAI_API_KEY), or URL credentials, and a server that
    echoes each request's headers, URL and credentials in its error bodies once preflight is
    done: no file of the run and no line of output holds the key or the password."""
    key, password = "sk-planted-KEY-0123456789abcdef", "pl4nted-pass"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    engine_thread.echo_after = 2  # the preflight's two probes pass
    url = engine_thread.url
    if kind == "vllm":
        url = url.replace("http://", f"http://alice:{password}@")
    trace = helpers.write_weka(tmp_path / "t.jsonl", sessions=1, turns=3)
    out = tmp_path / "r"
    res = run(
        "--endpoint", f"eng={kind}@{url}", "--trace", trace, "--sessions", "1",
        "--duration-min", "0.02", "--window", "0-0.02", "--retries", "0", "--out", str(out),
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    run_files = [f for f in out.rglob("*") if f.is_file()]
    assert {f.name for f in run_files} >= {"manifest.json", "requests.jsonl", "summary.json"}
    # Issue 24: the bare base64 of user:password and of the key, in both alphabets; issue
    # 36: hex (either case), base64 behind one or two other bytes, upper case, a key's half.
    encoded = [
        base64.b64encode(f"alice:{password}".encode()).decode(),
        base64.urlsafe_b64encode(f"alice:{password}".encode()).decode(),
        base64.b64encode(key.encode()).decode().rstrip("="),
        password.encode().hex(),
        *(base64.b64encode(f"{p}alice:{password}".encode()).decode()[4:-4] for p in "xy"),
        key.encode().hex(),
        key.encode().hex().upper(),
        key.upper(),
        key[len(key) // 2 :],
    ]
    for secret in (key, password, *encoded):
        assert secret not in res.output + res.stderr
        for f in run_files:
            assert secret.encode() not in f.read_bytes(), f"{secret} in {f.name}"
    errors = read_requests(out)["error"].dropna()
    assert len(errors) and errors.str.len().max() < 700  # truncated, and scrubbed
    if kind == "vllm":  # the adapter keeps the body: it was echoed, and scrubbed
        assert errors.iloc[0].startswith("HTTP 500: token *** url-safe b'***' hex *** shifted")
        assert read_manifest(out).engines[0].url.startswith("http://***@127.0.0.1:")
    assert read_manifest(out).status == "degraded"  # every request failed
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["engines"]["eng"]["error_flagged"] is True


def test_url_and_key_together_fail_preflight_with_a_message(
    engine_thread: Any, helpers: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-KEY-0123456789abcdef")
    url = engine_thread.url.replace("http://", "http://alice:pl4nted-pass@")
    trace = helpers.write_weka(tmp_path / "t.jsonl")
    res = run("--endpoint", f"eng=openai@{url}", "--trace", trace, "--out", str(tmp_path / "r"))
    assert res.exit_code == 2 and "an endpoint takes one kind of credentials" in res.output
    assert "pl4nted-pass" not in res.output and not (tmp_path / "r").exists()


async def test_an_engine_that_went_down_is_recorded_with_its_times(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    trace = helpers.trace_of(helpers.growing_trajectory("a", turns=6))
    port = fake_engine.port
    plan = RunPlan(
        engines=[EngineSpec(name="vllm", kind="vllm", url=fake_engine.url)],
        trace=trace,
        workload=WorkloadConfig(sessions=2, duration_s=3.0, window=(0.0, 3.0)),
        out_dir=tmp_path / "r",
        retries=1,
        backoff_s=0.05,
        scrape_interval_s=0.5,
        flush_interval_s=0.2,
        health_interval_s=0.1,
        summarize=summary_of_dir,
    )
    task = asyncio.create_task(run_live(plan))
    await asyncio.sleep(0.8)
    await fake_engine.stop()
    await asyncio.sleep(0.8)
    await fake_engine.start(port)
    outcome = await task
    man = read_manifest(tmp_path / "r")
    (down,) = [e for e in man.events if e.event == "engine_down"]
    assert down.engine == "vllm" and 0.5 < down.start_s < down.end_s < 2.5
    rate = outcome.summary["engines"]["vllm"]["error_rate"]
    assert outcome.status == ("degraded" if rate > 0.05 else "completed")
    assert any("vllm: engine down from" in n for n in outcome.summary["notes"])


VLLM_CRASH_LOG = """\
INFO 12-05 10:00:01 [loggers.py:123] Engine 000: Avg prompt throughput: 812.4 tokens/s
(EngineCore_DP0 pid=4242) ERROR 12-05 10:00:02 [core.py:710] EngineCore encountered a fatal error.
(EngineCore_DP0 pid=4242) ERROR 12-05 10:00:02 [core.py:710] Traceback (most recent call last):
(EngineCore_DP0 pid=4242) ERROR 12-05 10:00:02 [core.py:710]   File "mamba_mixer2.py", line 880, in forward
(EngineCore_DP0 pid=4242) ERROR 12-05 10:00:02 [core.py:710]     raise IndexError(msg)
(EngineCore_DP0 pid=4242) ERROR 12-05 10:00:02 [core.py:710] IndexError: index 7 is out of bounds for dimension 0 with size 4
\x1b[1;31mERROR 12-05 10:00:02 [async_llm.py:480] AsyncLLM output_handler failed.\x1b[0m
INFO:     Shutting down
"""


def _outage_plan(url: str, out: Path, helpers: Any, log: Path, duration_s: float) -> RunPlan:
    return RunPlan(
        engines=[EngineSpec(name="vllm", kind="vllm", url=url)],
        trace=helpers.trace_of(helpers.growing_trajectory("a", turns=6)),
        workload=WorkloadConfig(sessions=2, duration_s=duration_s, window=(0.0, duration_s)),
        out_dir=out,
        retries=1,
        backoff_s=0.05,
        scrape_interval_s=0.5,
        flush_interval_s=0.1,
        health_interval_s=0.1,
        summarize=summary_of_dir,
        engine_logs={"vllm": log},
    )


async def test_an_engine_that_dies_ends_the_run_early_with_its_last_logged_error(
    fake_engine: Any, helpers: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every engine down for ENGINES_DOWN_END_S: the run ends at once (not at its 60 s), as
    `interrupted` (resumable), its records kept, the engine's last exception line from its
    log in the event and in the note that says how to continue."""
    monkeypatch.setattr("replay.client.orchestrate.ENGINES_DOWN_END_S", 0.6)
    log = tmp_path / "vllm.log"
    log.write_text("INFO starting\n")
    plan = _outage_plan(fake_engine.url, tmp_path / "r", helpers, log, duration_s=60.0)
    task = asyncio.create_task(run_live(plan))
    await asyncio.sleep(0.8)
    log.write_text(VLLM_CRASH_LOG)
    await fake_engine.stop()
    outcome = await asyncio.wait_for(task, 20)
    assert outcome.status == "interrupted"
    assert outcome.ended_by is not None and "every engine had been down" in outcome.ended_by
    assert "IndexError: index 7 is out of bounds" in outcome.ended_by
    assert f"replay run --resume {tmp_path / 'r'}" in outcome.ended_by
    man = read_manifest(tmp_path / "r")
    assert man.status == "interrupted"
    (down,) = [e for e in man.events if e.event == "engine_down"]
    assert down.end_s is None
    assert down.engine_error is not None and down.engine_error.endswith(
        "IndexError: index 7 is out of bounds for dimension 0 with size 4"
    )
    assert any(outcome.ended_by == n for n in man.notes)
    assert any("its log's last error: " in n for n in outcome.summary["notes"])
    df = read_requests(tmp_path / "r")
    assert (df.status == "ok").sum() >= 1  # what it had before the crash is kept


async def test_an_engine_down_at_the_end_of_a_run_makes_it_degraded(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    """Down for less than the early end but still down when the run ends: `degraded`, even
    when the window holds too few requests for the error share to say so."""
    log = tmp_path / "vllm.log"
    log.write_text("nothing of note\n")
    plan = _outage_plan(fake_engine.url, tmp_path / "r", helpers, log, duration_s=2.0)
    task = asyncio.create_task(run_live(plan))
    await asyncio.sleep(1.2)
    await fake_engine.stop()
    outcome = await asyncio.wait_for(task, 20)
    assert outcome.status == "degraded" and outcome.ended_by is None
    (down,) = read_manifest(tmp_path / "r").events
    assert down.end_s is None and down.engine_error is None  # the log holds no error line
