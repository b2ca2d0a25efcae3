"""Loading run directories: every error path names the file and what is wrong."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.runs import RunDirError, find_runs, load_run, resolve_inside

Builder = Callable[[], Any]


def _one(builder: Builder, name: str = "run", **manifest: Any) -> Path:
    return builder().req("a", 1.0).write(name, **manifest)


def _with_raw_manifest(run_dir: Path, **fields: Any) -> Path:
    """`run_dir` with fields of its manifest.json overwritten as given (no validation: a
    producer could not write them)."""
    data = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps({**data, **fields}))
    return run_dir


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="no such directory"):
        load_run(tmp_path / "nope")


def test_file_instead_of_directory(tmp_path: Path) -> None:
    f = tmp_path / "x.txt"
    f.write_text("hi")
    with pytest.raises(RunDirError, match=r"x\.txt: not a directory; pass a run directory"):
        load_run(f)


def test_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match=r"manifest\.json: missing; is .* a run directory"):
        load_run(tmp_path)


@pytest.mark.rundir_unchecked
def test_malformed_manifest(builder: Builder) -> None:
    run_dir = _one(builder)
    (run_dir / "manifest.json").write_text("{not json")
    with pytest.raises(RunDirError, match=r"manifest\.json: not valid JSON"):
        load_run(run_dir)


def test_no_request_records(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(RunDirError, match=r"requests\.parquet: missing; the run wrote no"):
        load_run(tmp_path)


def test_requests_column_with_text(builder: Builder) -> None:
    run_dir = _one(builder)
    (run_dir / "requests.jsonl").unlink()
    table = pa.table(
        {"engine": ["a"], "prompt_tokens": ["lots"], "status": ["ok"], "scheduled_s": [1.0]}
    )
    pq.write_table(table, run_dir / "requests.parquet")
    with pytest.raises(RunDirError, match=r"requests\.parquet: column 'prompt_tokens' must hold"):
        load_run(run_dir)


@pytest.mark.rundir_unchecked
def test_malformed_summary(builder: Builder) -> None:
    run_dir = _one(builder)
    (run_dir / "summary.json").write_text("[1, 2")
    with pytest.raises(RunDirError, match=r"summary\.json: not valid JSON .*replay report"):
        load_run(run_dir)
    (run_dir / "summary.json").write_text("[1, 2]")
    with pytest.raises(RunDirError, match=r"summary\.json: expected a JSON object"):
        load_run(run_dir)


def test_unreadable_server_metrics(builder: Builder) -> None:
    run_dir = _one(builder)
    (run_dir / "server_metrics.parquet").write_bytes(b"not parquet")
    with pytest.raises(RunDirError, match=r"server_metrics\.parquet: unreadable parquet"):
        load_run(run_dir)


@pytest.mark.rundir_unchecked
def test_malformed_window_in_manifest(builder: Builder) -> None:
    bad = _with_raw_manifest(_one(builder), config={"window": [300, 100]})
    with pytest.raises(
        RunDirError, match=r"manifest\.json: field 'config\.window': a window must have 0 <="
    ):
        load_run(bad)
    bad = _with_raw_manifest(_one(builder, "r2"), config={"window": "abc"})
    with pytest.raises(RunDirError, match=r"'config\.window': a window is \[start_s, end_s\]"):
        load_run(bad)


def test_find_runs_lists_and_refuses_outside(tmp_path: Path, builder: Builder) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    outside = _one(builder, "elsewhere")
    inside_a = builder().req("a", 1.0).write("runs/sweep/s8")
    inside_b = builder().req("a", 1.0).write("runs/s16")
    # a run directory whose manifest links outside the root is skipped
    sneaky = root / "sneaky"
    sneaky.mkdir()
    os.symlink(outside / "manifest.json", sneaky / "manifest.json")
    os.symlink(outside, root / "linked")  # linked folders are not followed
    assert find_runs(root) == sorted([inside_a, inside_b])
    with pytest.raises(RunDirError, match="outside the runs folder"):
        resolve_inside(root, "../elsewhere")
    assert resolve_inside(root, "s16") == inside_b.resolve()
    with pytest.raises(RunDirError, match="not a directory of runs"):
        find_runs(tmp_path / "missing")


def test_engine_flags_from_a_list_a_string_or_policy_options() -> None:
    from analysis.manifest import manifest_engines
    from replay.rundir import parse_manifest

    manifest = parse_manifest(
        Path("manifest.json"),
        {
            "engines": [
                {"name": "x", "flags": ["--a", "--b"], "gpus": 2},
                {"name": "y", "flags": "--c --d"},
                {"name": "z", "flags": {"tiers": True, "alpha": 0.5}},
                "w",
            ]
        },
    )
    engines = manifest_engines(manifest)
    assert list(engines) == ["x", "y", "z", "w"]
    assert engines["x"].flags == ["--a", "--b"] and engines["x"].gpus == 2
    assert engines["y"].flags == ["--c", "--d"] and engines["y"].gpus_assumed
    assert engines["z"].flags == ["alpha=0.5", "tiers=True"]
    assert engines["w"].gpus == 1 and engines["w"].gpus_assumed


def test_the_executor_summarises_a_run_as_the_status_it_closes_with(
    builder: Builder,
) -> None:
    """`replay run` asks for the summary while the manifest still says `running`; a running
    run's data covers only up to its last event, so without the status it is about to close
    with, a completed run whose last request ended early was summarised on a clipped window
    that `replay price` (reading the closed run) does not use (seen: the one-pricing test)."""
    import json

    from analysis.summary import summary_of_dir

    run_dir = (
        builder()
        .req("a", 10.0)
        .req("a", 40.0)
        .write("early", config={"duration_s": 100.0, "window": [0.0, 100.0]})
    )
    manifest = run_dir / "manifest.json"
    man = json.loads(manifest.read_text())
    man["status"] = "running"
    manifest.write_text(json.dumps(man))
    assert summary_of_dir(run_dir).window == pytest.approx([0.0, 42.0])  # its last event
    assert summary_of_dir(run_dir, "completed").window == pytest.approx([0.0, 100.0])
    assert json.loads(manifest.read_text())["status"] == "running"  # nothing written
