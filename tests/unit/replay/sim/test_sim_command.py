"""`replay simulate` through the real command line: outputs, fan-out, and every bad flag."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.rundir import read_manifest, read_summary
from replay.sim.measures import SUMMARY_COLUMNS

runner = CliRunner()
SHORT = ["--duration-min", "20", "--window", "5-20", "--capacity-blocks", "400"]


def simulate(*args: str):
    return runner.invoke(app, ["simulate", *args])


def test_sweep_writes_runs_summary_csv_and_json(small_corpus, tmp_path):
    out = tmp_path / "sweep"
    res = simulate(
        "--trace",
        str(small_corpus),
        "--policies",
        "vllm,flashstate",
        "--sessions",
        "2,3",
        "--seeds",
        "2",
        "--out",
        str(out),
        "--json",
        *SHORT,
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert len(rows) == 8
    assert [(r["policy"], r["sessions"], r["seed"]) for r in rows[:3]] == [
        ("vllm", 2, 0),
        ("vllm", 2, 1),
        ("vllm", 3, 0),
    ]
    with (out / "summary.csv").open() as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0])[: len(SUMMARY_COLUMNS)] == list(SUMMARY_COLUMNS)
    assert len(table) == 8
    assert float(table[0]["hit_rate"]) == pytest.approx(rows[0]["hit_rate"])
    man = read_manifest(out / "flashstate-s3-seed1")
    assert man.status == "completed" and man.config.capacity_blocks == 400
    assert man.command.startswith("replay ")
    # summary.json is analysis.summary's (its one producer), on the same window as the row.
    summary = read_summary(out / "flashstate-s3-seed1")
    (row,) = [r for r in rows if (r["policy"], r["sessions"], r["seed"]) == ("flashstate", 3, 1)]
    assert summary is not None and summary.window_source == "manifest config.window"
    assert summary.engines["flashstate"]["hit_rate"] == pytest.approx(row["hit_rate"])
    assert summary.engines["flashstate"]["working_set_ratio"] == pytest.approx(
        row["working_set_ratio"]
    )


def test_worker_processes_give_the_same_rows(small_corpus, tmp_path):
    args = [
        "--trace",
        str(small_corpus),
        "--policies",
        "asc-lru,flashstate-eq7",
        "--sessions",
        "2",
        "--json",
        *SHORT,
    ]
    one = simulate(*args, "--out", str(tmp_path / "a"))
    two = simulate(*args, "--out", str(tmp_path / "b"), "--workers", "2")
    assert one.exit_code == 0 and two.exit_code == 0, two.output
    strip = lambda rows: [{k: v for k, v in r.items() if k != "wall_seconds"} for r in rows]  # noqa: E731
    assert strip(json.loads(one.stdout)) == strip(json.loads(two.stdout))


def test_engine_timing_reports_latency(small_corpus, tmp_path):
    res = simulate(
        "--trace",
        str(small_corpus),
        "--policies",
        "vllm",
        "--sessions",
        "2",
        "--timing",
        "engine",
        "--out",
        str(tmp_path / "e"),
        "--json",
        *SHORT,
    )
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    assert row["timing"] == "engine" and row["ttft_p90_s"] >= row["ttft_p50_s"] > 0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--policies", "vllm,lru"],
            "--policies: unknown policy lru (known: vllm, vllm-like, sglang",
        ),
        (["--policies", " , "], "--policies: give at least one policy"),
        (["--sessions", "8,x"], "--sessions: 'x' is not a positive whole number"),
        (["--sessions", "0"], "--sessions 0: must be at least 1"),
        (["--sessions", "8,0"], "--sessions 0: must be at least 1"),
        (["--window", "15to45"], "--window 15to45: expected A-B in minutes"),
        (["--window", "10-50"], "--window 10-50 ends after the run (--duration-min 45)"),
        (["--timing", "fast"], "--timing: 'fast' is not one of trace, engine"),
        (["--model", "no-such-model"], "--model: model profile 'no-such-model' not found"),
        (["--duration-min", "0"], "--duration-min: must be positive"),
        (["--subagents", "parallel"], "--subagents: 'parallel' is not one of concurrent, inline"),
        (["--token-scale", "8"], "--token-scale 8 contradicts trace"),
    ],
)
def test_bad_flags_are_named(small_corpus, tmp_path, flags, message):
    base = {"--trace": str(small_corpus), "--policies": "vllm", "--sessions": "2"}
    for i in range(0, len(flags), 2):
        base[flags[i]] = flags[i + 1]
    args = [x for kv in base.items() for x in kv]
    res = simulate(*args, "--out", str(tmp_path / "o"))
    assert res.exit_code == 2
    assert message in " ".join(res.output.split())


def test_missing_trace_names_the_flag(tmp_path):
    res = simulate(
        "--trace",
        str(tmp_path / "nope.jsonl"),
        "--policies",
        "vllm",
        "--sessions",
        "2",
        "--out",
        str(tmp_path / "o"),
    )
    assert res.exit_code == 2
    assert "--trace:" in res.output and "nope.jsonl" in res.output


def test_an_existing_run_directory_is_not_overwritten(small_corpus, tmp_path):
    args = [
        "--trace",
        str(small_corpus),
        "--policies",
        "vllm",
        "--sessions",
        "2",
        "--out",
        str(tmp_path / "o"),
        *SHORT,
    ]
    assert simulate(*args).exit_code == 0
    again = simulate(*args)
    assert again.exit_code == 2
    assert "--out " in again.output and "already holds a run" in again.output


def test_a_folder_an_earlier_sweep_wrote_is_refused_before_any_run(small_corpus, tmp_path):
    """Another policy into the same --out used to replace the first sweep's summary.csv with
    its own rows alone (issue 36's probes, round four)."""
    out = tmp_path / "o"
    common = ["--trace", str(small_corpus), "--sessions", "2", "--out", str(out), *SHORT]
    assert simulate("--policies", "vllm", *common).exit_code == 0
    before = (out / "summary.csv").read_bytes()
    again = simulate("--policies", "dense", *common)
    assert again.exit_code == 2
    text = " ".join(again.output.split())
    assert f"--out {out}: already holds a run (summary.csv); choose a new --out" in text
    assert "--resume" not in text  # simulate has none to offer
    assert (out / "summary.csv").read_bytes() == before
    assert not any(p.name.startswith("dense") for p in out.iterdir())


def test_a_folder_holding_a_run_directory_is_refused(small_corpus, tmp_path):
    out = tmp_path / "o"
    (out / "vllm-s2-seed0").mkdir(parents=True)
    (out / "vllm-s2-seed0" / "manifest.json").write_text("{}")
    res = simulate("--trace", str(small_corpus), "--policies", "vllm", "--sessions", "2",
                   "--out", str(out), *SHORT)  # fmt: skip
    assert res.exit_code == 2
    assert "already holds a run (vllm-s2-seed0/manifest.json)" in " ".join(res.output.split())


def test_ray_without_the_extra_says_how_to_install_it(small_corpus, tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # `import ray` fails
    res = simulate(
        "--trace",
        str(small_corpus),
        "--policies",
        "vllm",
        "--sessions",
        "2",
        "--out",
        str(tmp_path / "o"),
        "--ray",
        "local",
        *SHORT,
    )
    assert res.exit_code == 2
    assert (
        "--ray: Ray is not installed; it is the optional extra: pip install 'agent-replay[ray]'"
        in " ".join(res.output.split())
    )


def test_without_json_a_table_is_printed(small_corpus, tmp_path):
    res = simulate(
        "--trace",
        str(small_corpus),
        "--policies",
        "ideal",
        "--sessions",
        "2",
        "--out",
        str(tmp_path / "t"),
        *SHORT,
    )
    assert res.exit_code == 0, res.output
    assert "│ ideal" in res.output and "redundant/req" in res.output and "%" in res.output


def test_without_a_window_the_last_two_thirds_are_measured_and_said(small_corpus, tmp_path):
    res = simulate(
        "--trace", str(small_corpus), "--policies", "vllm", "--sessions", "2",
        "--duration-min", "6", "--model", "no-such-model", "--out", str(tmp_path / "o"),
    )  # fmt: skip
    text = " ".join(res.output.split())
    assert "window 2-6 min (none given: the last two thirds of the 6-minute run)" in text


def test_scaled_trace_is_applied_and_recorded(small_corpus, tmp_path):
    """The small corpus declares token_scale 16: simulate scales the profile by it, reports
    the working set and records the effective cache in the manifest."""
    out = tmp_path / "o"
    res = simulate(
        "--trace", str(small_corpus), "--policies", "vllm", "--sessions", "2",
        "--subagents", "skip", "--out", str(out), "--json", *SHORT,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    assert row["token_scale"] == 16 and row["block_tokens"] == 272
    assert row["subagents"] == "skip" and row["working_set_ratio"] > 0
    m = read_manifest(out / "vllm-s2-seed0")
    assert m.config.capacity_blocks == 400 and m.config.token_scale == 16
    assert m.workload.subagents == "skip"


def test_an_undeclared_scaled_looking_trace_needs_the_flag(tmp_path):
    """A trace without token_scale whose first prompts are tiny: the error says what to
    pass; passing it runs."""
    from replay.traces.synth import SynthConfig, synth_lines

    path = tmp_path / "old.jsonl"
    lines = synth_lines(SynthConfig(n_trajectories=3, seed=2, scale=16))
    path.write_bytes(b"".join(ln.replace(b',"token_scale":16', b"") + b"\n" for ln in lines))
    args = ["--trace", str(path), "--policies", "vllm", "--sessions", "2", *SHORT]
    res = simulate(*args, "--out", str(tmp_path / "a"))
    assert res.exit_code == 2
    assert "declares no token_scale" in res.output and "--token-scale" in res.output
    res = simulate(*args, "--token-scale", "16", "--out", str(tmp_path / "b"), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)[0]["token_scale"] == 16


def test_a_short_engine_timed_sweep_cuts_its_warm_up_as_replay_run_does(small_corpus, tmp_path):
    """The timed replay's default warm-up (120 s) is cut to half of a 2-minute run, as
    `replay run` cuts it (it used to be refused, naming no flag the user gave); the manifest's
    spec and config hold the warm-up replayed."""
    out = tmp_path / "o"
    res = simulate("--trace", str(small_corpus), "--policies", "vllm", "--sessions", "2",
                   "--timing", "engine", "--duration-min", "2", "--out", str(out))  # fmt: skip
    assert res.exit_code == 0, res.output
    man = read_manifest(out / "vllm-s2-seed0")
    assert man.spec is not None and man.spec["workload"]["warmup_s"] == 60.0
    assert man.config.warmup_s == 60.0


def test_a_warm_up_given_past_a_trace_timed_run_names_the_flag(small_corpus, tmp_path):
    res = simulate("--trace", str(small_corpus), "--policies", "vllm", "--sessions", "2",
                   "--duration-min", "2", "--warmup-s", "150", "--out", str(tmp_path / "o"))  # fmt: skip
    assert res.exit_code == 2
    assert "warm-up must lie within the run: 0 ≤ 150 < 120 s (check --warmup-s)" in " ".join(
        res.output.split()
    )


@pytest.mark.parametrize("fleet", [[], ["--replicas", "2", "--router", "round_robin"]])
def test_requests_past_the_models_context_are_overflows_not_computed(small_corpus, tmp_path, fleet):
    """The emulator refuses a prompt and output over the profile's context (HTTP 400), and
    the live client, knowing the context, records such a request as an overflow it did not
    send and goes on to the session's next turn. The simulator does the same (alone and in
    a fleet), and says so before the run."""
    from pathlib import Path

    import pandas as pd

    text = (Path(__file__).parents[4] / "configs/models/glm-5.3-flash.yaml").read_text()
    short = tmp_path / "short-context.yaml"
    short.write_text(text.replace("context_tokens: 1048576", "context_tokens: 160000"))
    args = ["--trace", str(small_corpus), "--policies", "vllm", "--sessions", "2", *SHORT, *fleet]
    res = simulate(*args, "--model", str(short), "--out", str(tmp_path / "a"))
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    # The corpus is scaled 16×: 160,000 tokens of context are 10,000 of its tokens.
    assert "requests exceed the model's context (10,000 tokens of prompt and output" in said
    assert "recorded as overflows, not sent, and their sessions go on" in said
    run = next(p for p in (tmp_path / "a").iterdir() if p.is_dir())
    df = pd.read_parquet(run / "requests.parquet")
    long = df.prompt_tokens + df.expected_output_tokens > 10_000
    assert long.any() and (~long).any()
    assert (df[long].status == "overflow").all()
    assert df[long].sent_s.isna().all() and (df[long].cached_tokens.fillna(0) == 0).all()
    first = df[long].iloc[0]
    assert first.error == (
        f"prompt {first.prompt_tokens} + output {first.expected_output_tokens} tokens exceed "
        "the engine's context of 10000 tokens; not sent"
    )
    assert (df[~long].status != "overflow").all()  # the sessions went on past them
    full = simulate(*args, "--out", str(tmp_path / "b"))
    assert full.exit_code == 0 and "exceed the model's context" not in full.output
    df = pd.read_parquet(
        next(p for p in (tmp_path / "b").iterdir() if p.is_dir()) / "requests.parquet"
    )
    assert (df.status != "overflow").all()
