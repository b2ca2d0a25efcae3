"""`replay traces synth|convert`: a trace too large for the disk is refused before writing,
SIGTERM leaves no partial file, and a Mooncake conversion names the token_scale it drops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.traces.synth import SynthConfig, estimated_bytes, synth_lines

runner = CliRunner()
Usage = namedtuple("Usage", "total used free")


def test_the_size_estimate_is_near_what_is_written() -> None:
    for scale in (16.0, 256.0):
        lines = list(synth_lines(SynthConfig(n_trajectories=40, seed=3, scale=scale)))
        raw = sum(len(line) + 1 for line in lines)
        est = estimated_bytes(40, scale, gz=False)
        assert raw / 2 < est < raw * 2


def test_a_trace_larger_than_the_free_space_is_refused_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "replay.commands.traces.shutil.disk_usage", lambda p: Usage(10**9, 0, 10**8)
    )
    out = tmp_path / "X.jsonl"
    result = runner.invoke(app, ["traces", "synth", "--out", str(out), "--trajectories", "1000"])
    assert result.exit_code == 2
    msg = " ".join(result.stderr.split())
    assert "--trajectories 1,000" in msg and "4.3 GB" in msg and "100.0 MB free" in msg
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []
    # what fits is written
    result = runner.invoke(
        app, ["traces", "synth", "--out", str(out), "--trajectories", "2", "--scale", "64"]
    )
    assert result.exit_code == 0, result.output
    assert out.exists()


def test_a_count_past_the_bound_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "X.jsonl"
    result = runner.invoke(
        app, ["traces", "synth", "--out", str(out), "--trajectories", "100000000"]
    )
    assert result.exit_code == 2
    assert "--trajectories 100,000,000: must be at most 10,000,000" in " ".join(
        result.stderr.split()
    )
    assert not out.exists()


def test_sigterm_during_synth_leaves_no_partial_file(tmp_path: Path) -> None:
    out = tmp_path / "big.jsonl.gz"
    part = tmp_path / ".big.jsonl.gz.part"
    # minutes of work, about 200 MB by the estimate (so the disk check lets it start)
    args = ["traces", "synth", "--out", str(out), "--trajectories", "20000", "--scale", "1000"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "replay", *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not (part.exists() and part.stat().st_size > 0):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the .part file never appeared"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert b"stopped by SIGTERM" in err and b"Traceback" not in err
    assert not part.exists() and not out.exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # this process untouched


def test_convert_to_mooncake_names_the_token_scale_it_drops(tmp_path: Path) -> None:
    src, out = tmp_path / "scaled.jsonl", tmp_path / "m.jsonl"
    result = runner.invoke(
        app,
        ["traces", "synth", "--out", str(src), "--trajectories", "2", "--scale", "16"],
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        app, ["traces", "convert", str(src), "--to", "mooncake", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    said = " ".join(result.stdout.split())
    assert "dropped: token_scale 16" in said and "--token-scale 16" in said
    # a full-size trace has nothing to name
    full = tmp_path / "full.jsonl"
    full.write_bytes(
        b'{"id":"s","block_size":64,"hash_id_scope":"local","requests":'
        b'[{"t":0,"in":20000,"out":5,"hash_ids":[1,2]}]}\n'
    )
    result = runner.invoke(
        app, ["traces", "convert", str(full), "--to", "mooncake", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "token_scale" not in result.stdout
