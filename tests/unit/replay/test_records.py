from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.records import RECORD_FIELDS, REQUEST_SCHEMA, RequestRecord
from replay.rundir import RunDirError, RunWriter, read_manifest, read_requests
from replay.rundir_models import Manifest, RunSummary


def _rec(i: int) -> RequestRecord:
    return RequestRecord(
        engine="vllm",
        session=0,
        trajectory="t0",
        agent="main",
        turn=i,
        scheduled_s=float(i),
        prompt_tokens=100 * i,
        cached_tokens=50 * i,
    )


def test_schema_matches_record() -> None:
    assert tuple(REQUEST_SCHEMA.names) == RECORD_FIELDS


def test_writer_roundtrip_and_status(tmp_path: Path) -> None:
    run = tmp_path / "r1"
    w = RunWriter(run, Manifest(command="test")).open()
    for i in range(3):
        w.add(_rec(i))
    w.flush()
    assert read_manifest(run).status == "running"
    assert len(read_requests(run)) == 3
    w.close("completed", summary=RunSummary(run_id="r1", notes=["ok"]))
    df = read_requests(run)
    assert list(df["turn"]) == [0, 1, 2]
    assert read_manifest(run).status == "completed"
    assert json.loads((run / "summary.json").read_text())["notes"] == ["ok"]


def test_journal_ahead_of_parquet_is_read(tmp_path: Path) -> None:
    run = tmp_path / "r2"
    w = RunWriter(run, Manifest(), parquet_interval_s=3600).open()
    w.add(_rec(0))
    w.flush(force_parquet=True)
    w.add(_rec(1))
    w.flush()  # journal has 2, parquet has 1: a kill here must lose nothing
    assert len(read_requests(run)) == 2
    # a torn last line (killed mid-write) is skipped, earlier lines kept
    with open(run / "requests.jsonl", "ab") as f:
        f.write(b'{"engine": "vl')
    assert len(read_requests(run)) == 2


@pytest.mark.rundir_unchecked  # writes a broken manifest on purpose
def test_missing_run_dir_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match=r"manifest\.json: missing"):
        read_manifest(tmp_path / "nope")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "manifest.json").write_text("{oops")
    with pytest.raises(RunDirError, match="not valid JSON"):
        read_manifest(tmp_path / "bad")


def test_refuses_to_overwrite(tmp_path: Path) -> None:
    run = tmp_path / "r3"
    RunWriter(run, Manifest()).open().close()
    with pytest.raises(RunDirError, match="already holds a run"):
        RunWriter(run, Manifest()).open()
