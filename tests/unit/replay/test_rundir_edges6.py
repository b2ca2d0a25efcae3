"""A run directory's values that entered unchecked, on a real simulated run read by the real
`replay price` / `replay report`: a manifest's token scale outside the run spec's range, a
measured window past the run's duration, a run id holding a control character, an
unreadable (derived) requests.parquet, a journal edited after the parquet was written, and a
journal line without an engine. Each is refused naming the file and field (or line) and
what to do, exit 2, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.rundir import JOURNAL, MANIFEST, REQUESTS, read_requests


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("edges6") / "sim"
    res = invoke("simulate", "--policies", "vllm", "--sessions", "2", "--duration-min", "5",
                 "--timing", "engine", "--out", str(out))  # fmt: skip
    assert res.exit_code == 0, said(res)
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def copy_of(run: Path, tmp_path: Path, **edit: Any) -> Path:
    """A copy of `run` with manifest fields set: `config__token_scale=0` sets
    config.token_scale."""
    bad = tmp_path / "bad"
    shutil.copytree(run, bad)
    manifest = json.loads((bad / MANIFEST).read_text())
    for key, value in edit.items():
        *parents, name = key.split("__")
        node = manifest
        for p in parents:
            node = node[p]
        node[name] = value
    (bad / MANIFEST).write_text(json.dumps(manifest))
    return bad


def refused(run_dir: Path, tmp_path: Path, *expected: str) -> None:
    """`replay price` and `replay report` both exit 2 saying each of `expected`."""
    rep = tmp_path / "rep"
    for args in (
        ("price", str(run_dir)),
        ("report", str(run_dir), "--out", str(rep), "--no-static", "--no-figures"),
    ):
        res = invoke(*args)
        text = said(res)
        assert res.exit_code == 2, (args, text)
        for part in expected:
            assert part in text, (args, text)
        assert "Traceback" not in text


@pytest.mark.rundir_unchecked  # the manifest is broken on purpose
@pytest.mark.parametrize("value", [1e300, 0, -16, True])
@pytest.mark.parametrize("field", ["config", "trace"])
def test_a_manifest_token_scale_outside_the_run_specs_range_is_refused(
    run: Path, tmp_path: Path, field: str, value: Any
) -> None:
    bad = copy_of(run, tmp_path, **{f"{field}__token_scale": value})
    why = "not a yes/no value" if value is True else "at least 1 and at most 1,048,576"
    refused(bad, tmp_path, f"{bad / MANIFEST}: field '{field}.token_scale'", why)


@pytest.mark.rundir_unchecked
def test_a_measured_window_past_the_runs_duration_is_refused(run: Path, tmp_path: Path) -> None:
    bad = copy_of(run, tmp_path, config__duration_s=1e-9)
    refused(
        bad, tmp_path, f"{bad / MANIFEST}: field 'config.duration_s'",
        "config.window [100, 300] s ends after the run's length config.duration_s 1e-09 s",
    )  # fmt: skip


@pytest.mark.rundir_unchecked
@pytest.mark.parametrize("run_id", ["a\nb", "run\x1b[31mred"])
def test_a_run_id_with_a_control_character_is_refused(
    run: Path, tmp_path: Path, run_id: str
) -> None:
    bad = copy_of(run, tmp_path, run_id=run_id)
    refused(bad, tmp_path, f"{bad / MANIFEST}: field 'run_id'", "a control character")


def test_an_unreadable_parquet_is_named_derived_and_rebuilt_once_deleted(
    run: Path, tmp_path: Path
) -> None:
    bad = copy_of(run, tmp_path)
    (bad / REQUESTS).write_text("garbage\n")
    refused(
        bad, tmp_path, f"{bad / REQUESTS}: unreadable parquet",
        f"derived from {JOURNAL}: delete {bad / REQUESTS} and it is rebuilt from the journal",
    )  # fmt: skip
    (bad / REQUESTS).unlink()
    res = invoke("price", str(bad))
    assert res.exit_code == 0, said(res)
    # Without the journal there is nothing to rebuild from: restore it.
    (bad / REQUESTS).write_text("garbage\n")
    (bad / JOURNAL).unlink()
    res = invoke("price", str(bad))
    assert res.exit_code == 2 and f"no {JOURNAL} to rebuild it from" in said(res), said(res)


def test_a_journal_edited_after_the_parquet_was_written_is_read(run: Path, tmp_path: Path) -> None:
    bad = copy_of(run, tmp_path)
    lines = (bad / JOURNAL).read_bytes().splitlines(keepends=True)
    assert len(read_requests(bad)) == len(lines) > 1
    (bad / JOURNAL).write_bytes(b"".join(lines[:-1]))  # the last line deleted, as advised
    pq_ns = (bad / REQUESTS).stat().st_mtime_ns
    os.utime(bad / JOURNAL, ns=(pq_ns + 10**9, pq_ns + 10**9))
    assert len(read_requests(bad)) == len(lines) - 1
    # A journal no newer than the parquet with no more lines leaves the parquet read.
    os.utime(bad / JOURNAL, ns=(pq_ns - 10**9, pq_ns - 10**9))
    assert len(read_requests(bad)) == len(lines)


@pytest.mark.parametrize("line", [b"{}\n", b'{"engine": ""}\n'])
def test_a_journal_line_without_an_engine_is_named_by_its_line(
    run: Path, tmp_path: Path, line: bytes
) -> None:
    bad = copy_of(run, tmp_path)
    n = (bad / JOURNAL).read_bytes().count(b"\n") + 1
    with open(bad / JOURNAL, "ab") as f:
        f.write(line)
    refused(
        bad, tmp_path, f"{bad / JOURNAL}: line {n}: field 'engine' is missing or empty",
        f"restore or delete line {n}",
    )  # fmt: skip
