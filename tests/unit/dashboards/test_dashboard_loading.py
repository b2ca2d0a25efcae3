"""Cached loading: the same files give the same parsed run; a changed file is re-read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dashboards.loading import RunUnavailable, load, run_metrics, run_stamp


@pytest.fixture(autouse=True)
def _clean(fresh_cache: None) -> None:
    """Each test starts with empty caches."""


def test_cached_until_a_file_changes(tmp_path: Path, synth: dict[str, Any]) -> None:
    run_dir = synth["write_synthetic_run"](tmp_path / "r", n_requests=200)
    first = load(tmp_path, "r")
    assert load(tmp_path, "r") is first  # no re-read, no copy
    stamp = run_stamp(run_dir)
    # Touch the manifest one second later: the stamp changes and the run is read again.
    manifest = run_dir / "manifest.json"
    later = manifest.stat().st_mtime_ns + 1_000_000_000
    os.utime(manifest, ns=(later, later))
    assert run_stamp(run_dir) != stamp
    again = load(tmp_path, "r")
    assert again is not first
    assert len(again.requests) == len(first.requests)


def test_metrics_follow_the_stamp(tmp_path: Path, synth: dict[str, Any]) -> None:
    synth["write_synthetic_run"](tmp_path / "r", n_requests=200, seed=5)
    run = load(tmp_path, "r")
    table = run_metrics(run)
    assert list(table["engine"]) == ["flashstate", "vllm", "sglang"]
    assert run_metrics(run).equals(table)


def test_refusals_and_missing_runs_are_messages(tmp_path: Path) -> None:
    with pytest.raises(RunUnavailable, match="outside the runs folder"):
        load(tmp_path / "runs", "..")
    (tmp_path / "runs" / "empty").mkdir(parents=True)
    with pytest.raises(RunUnavailable, match=r"Cannot open this run: .*manifest\.json: missing"):
        load(tmp_path / "runs", "empty")


def test_a_run_whose_manifest_links_outside_is_not_loaded(
    tmp_path: Path, synth: dict[str, Any]
) -> None:
    """Issue 36: the run loader followed a manifest.json symlinked outside the runs folder."""
    root = tmp_path / "runs"
    elsewhere = synth["write_synthetic_run"](tmp_path / "elsewhere", n_requests=20)
    run_dir = synth["write_synthetic_run"](root / "r", n_requests=20)
    (run_dir / "manifest.json").unlink()
    os.symlink(elsewhere / "manifest.json", run_dir / "manifest.json")
    with pytest.raises(RunUnavailable, match=r"'r': its manifest.json links outside the runs"):
        load(root, "r")
