"""`replay traces stats|synth|convert` through the real command line (typer's CliRunner)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from replay.cli import app
from replay.traces import load_trace, sample_path
from replay.traces.stats import trace_stats
from replay.workload import DEFAULT_WORKLOAD

runner = CliRunner()
REQUIRED_KEYS = {
    "trajectories",
    "requests",
    "top_level_requests",
    "subagent_requests",
    "subagents",
    "mean_prompt_tokens",
    "median_prompt_tokens",
    "mean_output_tokens",
    "median_output_tokens",
    "continuation_share",
    "context_edit_share",
    "tool_gap_over_cap_share",
}
GOOD = {
    "id": "s",
    "block_size": 64,
    "hash_id_scope": "local",
    "requests": [{"t": 0, "in": 100, "out": 5, "hash_ids": [1, 2]}],
}


def test_stats_json_on_the_sample() -> None:
    result = runner.invoke(app, ["traces", "stats", str(sample_path()), "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert set(figures) >= REQUIRED_KEYS
    expected = trace_stats(load_trace(sample_path()), DEFAULT_WORKLOAD.gap_cap_s)
    assert {k: figures[k] for k in REQUIRED_KEYS} == {k: expected[k] for k in REQUIRED_KEYS}
    assert figures["load_issues"] == 0 and figures["load_issue_examples"] == []
    assert figures["token_scale"] == 16
    assert (
        0 < figures["continuation_share"] < 1
        and figures["requests"] == figures["top_level_requests"] + figures["subagent_requests"]
    )


def test_stats_table_defaults_to_the_sample() -> None:
    result = runner.invoke(app, ["traces", "stats"])
    assert result.exit_code == 0, result.output
    assert "sample-weka.jsonl.gz" in result.stdout and "continuations" in result.stdout
    assert "no load issues" in result.stdout


def test_stats_reports_issue_count(write_jsonl: Callable[..., Path]) -> None:
    bad = {**GOOD, "id": "b", "requests": [{"t": 0, "in": 1000, "out": 5, "hash_ids": [1]}]}
    path = write_jsonl([GOOD, bad])
    result = runner.invoke(app, ["traces", "stats", str(path)])
    assert result.exit_code == 0, result.output
    assert (
        "1 load issue(s)" in result.stdout
        and f"{path}:2: field 'requests[0].hash_ids'" in result.stdout
    )
    figures = json.loads(runner.invoke(app, ["traces", "stats", str(path), "--json"]).stdout)
    assert figures["load_issues"] == 1 and figures["load_issue_examples"][0].startswith(
        f"{path}:2:"
    )


def test_stats_strict_fails_with_location(write_jsonl: Callable[..., Path]) -> None:
    bad = {**GOOD, "id": "b", "requests": [{"t": 0, "in": 1000, "out": 5, "hash_ids": [1]}]}
    path = write_jsonl([GOOD, bad])
    result = runner.invoke(app, ["traces", "stats", str(path), "--strict"])
    assert result.exit_code == 2
    assert f"{path}:2: field 'requests[0].hash_ids': 1 block ids for in=1000" in result.stderr
    assert "without --strict such inconsistencies are counted instead" in result.stderr


def test_stats_bad_input_exits_2(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([GOOD, "{not json"])
    result = runner.invoke(app, ["traces", "stats", str(path)])
    assert result.exit_code == 2 and f"{path}:2: field '(line)': malformed JSON" in result.stderr
    missing = runner.invoke(app, ["traces", "stats", "nope.jsonl"])
    assert (
        missing.exit_code == 2
        and "nope.jsonl: field 'src': no such file or folder" in missing.stderr
    )
    fmt = runner.invoke(app, ["traces", "stats", str(path), "--format", "csv"])
    assert (
        fmt.exit_code == 2 and "unknown format 'csv'; expected one of weka, mooncake" in fmt.stderr
    )


def test_synth_then_stats(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl.gz"
    result = runner.invoke(
        app,
        [
            "traces",
            "synth",
            "--out",
            str(out),
            "--trajectories",
            "3",
            "--seed",
            "9",
            "--scale",
            "32",
        ],
    )
    assert result.exit_code == 0, result.output
    assert f"wrote 3 sessions to {out}" in result.stdout.replace("\n", "")
    figures = json.loads(
        runner.invoke(app, ["traces", "stats", str(out), "--json", "--strict"]).stdout
    )
    assert figures["trajectories"] == 3 and figures["block_size"] == 64
    assert figures["token_scale"] == 32  # declared by synth --scale


def test_synth_bad_flags(tmp_path: Path) -> None:
    for args, message in [
        (
            ["--scale", "0.5"],
            "--scale must be a finite number of at least 1 and at most 1,048,576 (it divides "
            "token lengths; past the longest context of any model profile every length is 1 "
            "token), got 0.5",
        ),
        (["--scale", "1e200"], "at most 1,048,576 (it divides token lengths"),
        (["--trajectories", "0"], "--trajectories must be at least 1, got 0"),
    ]:
        result = runner.invoke(app, ["traces", "synth", "--out", str(tmp_path / "x.jsonl"), *args])
        assert result.exit_code == 2 and message in " ".join(result.stderr.split())
        assert not (tmp_path / "x.jsonl").exists()
    folder = runner.invoke(app, ["traces", "synth", "--out", str(tmp_path)])
    assert folder.exit_code == 2 and "is a folder; give a file name" in folder.stderr


def test_convert_both_ways(tmp_path: Path) -> None:
    moon, weka = tmp_path / "m.jsonl", tmp_path / "w.jsonl.gz"
    result = runner.invoke(
        app, ["traces", "convert", str(sample_path()), "--to", "mooncake", "--out", str(moon)]
    )
    assert result.exit_code == 0, result.output
    n = load_trace(sample_path()).num_requests
    assert f"wrote {n:,} Mooncake rows" in result.stdout and "dropped" in result.stdout
    back = runner.invoke(app, ["traces", "convert", str(moon), "--to", "weka", "--out", str(weka)])
    assert back.exit_code == 0, back.output
    assert load_trace(weka, strict=True).num_requests == n


def test_convert_bad_target(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["traces", "convert", str(sample_path()), "--to", "csv", "--out", str(tmp_path / "x")]
    )
    assert result.exit_code == 2 and "--to 'csv': expected one of weka, mooncake" in result.stderr


def test_out_that_cannot_be_written_fails_before_anything_starts(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    cases = [
        (["traces", "synth", "--trajectories", "2", "--out", str(tmp_path)], "is a folder"),
        (["traces", "synth", "--out", str(afile / "t.jsonl")], "is a file, not a folder"),
        (
            ["traces", "convert", str(sample_path()), "--to", "mooncake", "--out", str(tmp_path)],
            "is a folder",
        ),
        (
            ["traces", "convert", "/nonexistent.jsonl", "--to", "weka", "--out", str(afile / "x")],
            "is a file, not a folder",  # checked before the source is even opened
        ),
    ]
    for argv, message in cases:
        result = runner.invoke(app, argv)
        assert result.exit_code == 2, result.output
        assert "--out" in result.output and message in " ".join(result.output.split())
        assert "Traceback" not in result.output


def test_a_missing_requests_key_is_named(tmp_path: Path) -> None:
    bad = {k: v for k, v in GOOD.items() if k != "requests"}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(bad) + "\n")
    result = runner.invoke(app, ["traces", "stats", str(path)])
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert f"{path}:1" in text and "field 'requests'" in text and "missing" in text


def test_convert_scale_divides_lengths_and_keeps_prefix_sharing(tmp_path: Path) -> None:
    """A real-shaped session scaled by 4: lengths ÷ 4, ids grouped 4 to one (named by the
    group's last id), token_scale declared, and two turns share exactly the scaled blocks
    whose every original block they shared."""
    src = tmp_path / "s.jsonl"
    session = {
        "id": "s",
        "block_size": 64,
        "hash_id_scope": "local",
        "system_tokens": 4000,
        "requests": [
            {"t": 0, "in": 640, "out": 40, "hash_ids": list(range(1, 11))},
            {
                "t": 5,
                "in": 900,
                "out": 3,
                "hash_ids": [*range(1, 7), 50, 51, 52, 53, 54, 55, 56, 57, 58],
            },
        ],
    }
    src.write_text(json.dumps(session) + "\n")
    out = tmp_path / "s4.jsonl"
    result = runner.invoke(
        app, ["traces", "convert", str(src), "--to", "weka", "--scale", "4", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "lengths ÷ 4" in " ".join(result.stdout.split())
    tr = load_trace(out, strict=True).trajectories[0]
    assert tr.meta["token_scale"] == 4 and tr.meta["system_tokens"] == 1000
    assert tr.input_tokens.tolist() == [160, 225] and tr.output_tokens.tolist() == [10, 1]
    assert tr.blocks(0).tolist() == [4, 8, 10]
    # ids 1-6 shared: the first group (1-4) still is, the second (5-8 vs 5, 6, 50, 51) is not
    assert tr.blocks(1).tolist() == [4, 51, 55, 58]


def test_convert_scale_bad_values_are_named(tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    for args, message in [
        (["--to", "weka", "--scale", "0"], "--scale 0: expected a whole number of at least 1"),
        (["--to", "mooncake", "--scale", "4"], "--scale 4: only a Weka trace declares its scale"),
    ]:
        result = runner.invoke(
            app, ["traces", "convert", str(sample_path()), "--out", str(out), *args]
        )
        assert result.exit_code == 2 and message in result.stderr, result.output
