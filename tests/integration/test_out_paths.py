"""Outputs on a full disk or where nothing can be written (issue 36): every command that
writes says so, naming --out and the reason, and leaves nothing half-written under the final
name (no 0-byte lock, no partial trace) — never a traceback. A real full disk is a filled
256 KiB tmpfs (`small_tmpfs`); /proc and /dev/full are real places that refuse writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "replay" / "data" / "sample-weka.jsonl.gz"


def replay(*args: str) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "replay", *args], capture_output=True, text=True, timeout=180,
        cwd=ROOT, env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def _fill(folder: Path) -> None:
    """Leave the tmpfs with no free block (creating an empty file still works there)."""
    try:
        with (folder / "ballast").open("wb", buffering=0) as fh:
            while True:
                fh.write(b"\0" * 4096)
    except OSError:
        pass


def _run_dir_made(small_tmpfs: Path) -> None:
    rc, out = replay("run", "--endpoint", "vllm=http://127.0.0.1:9", "--no-panel", "--out",
                     str(small_tmpfs / "r"))  # fmt: skip
    assert rc != 0 and "cannot write the run directory" in out and "Traceback" not in out, out
    assert not (small_tmpfs / "r").exists(), list((small_tmpfs / "r").iterdir())


def test_a_full_disk_is_said_by_every_writer_and_leaves_nothing_half_written(
    small_tmpfs: Path, tmp_path: Path
) -> None:
    _fill(small_tmpfs)
    _run_dir_made(small_tmpfs)  # the lock's first write: no 0-byte lock, no folder left
    cases = {
        "synth": ("traces", "synth", "--trajectories", "3", "--out", str(small_tmpfs / "s.jsonl")),
        "convert": ("traces", "convert", str(SAMPLE), "--to", "weka", "--out",
                    str(small_tmpfs / "c.jsonl")),
        "run-config": ("engines", "run-config", "vllm-cpu-tiny=http://127.0.0.1:8000", "--out",
                       str(small_tmpfs / "e.yaml")),
        "simulate": ("simulate", "--policies", "vllm", "--sessions", "2", "--duration-min", "1",
                     "--out", str(small_tmpfs / "sim")),
    }  # fmt: skip
    for name, args in cases.items():
        rc, out = replay(*args)
        assert rc != 0, (name, out)
        assert "Traceback" not in out and "--out" in out, (name, out)
        assert "No space left on device" in out or "cannot write" in out, (name, out)
    left = sorted(p.name for p in small_tmpfs.iterdir())
    assert left in (["ballast"], ["ballast", "sim"]), left  # no trace, YAML or part file
    if (small_tmpfs / "sim").exists():
        assert not any((small_tmpfs / "sim").rglob("requests.parquet"))


@pytest.mark.parametrize("where", ["/proc/replay-out", "/dev/full"])
def test_an_out_that_refuses_writes_is_named(where: str, tmp_path: Path) -> None:
    for args in (
        ("traces", "synth", "--trajectories", "3", "--out", where),
        ("engines", "run-config", "vllm-cpu-tiny=http://127.0.0.1:8000", "--out", where),
        ("traces", "convert", str(SAMPLE), "--to", "weka", "--out", where),
    ):
        rc, out = replay(*args)
        assert rc != 0 and f"--out {where}" in out and "Traceback" not in out, (args, out)
    if where.startswith("/proc"):
        rc, out = replay("simulate", "--policies", "vllm", "--sessions", "2", "--duration-min",
                         "1", "--out", where)  # fmt: skip
        assert rc != 0 and f"--out {where}" in out and "Traceback" not in out, out
    assert Path("/dev/full").is_char_device()  # written in place, never replaced
