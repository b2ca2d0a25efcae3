"""The proof that live rewriting is exact: `replay run` against a real vLLM engine (the CPU
build, random weights, real prefix caching). Every continuation turn must find cached at least
its previous prompt plus the previous output minus one token (the last generated token has no
KV yet), rounded down to the engine's block size, which is read from `/metrics` (128 on the
CPU build, not 16) and recorded in the manifest."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replay.client.phases import PHASES, snapshot_path
from replay.rundir import read_manifest, read_requests

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def write_trace(path: Path, sessions: int = 3, turns: int = 5, block: int = 64) -> None:
    """Growing conversations of 1.2K-3.6K tokens with short outputs and no tool gaps."""
    lines = []
    for s in range(sessions):
        reqs: list[dict[str, Any]] = []
        for k in range(turns):
            n = 1200 + 600 * k + 37 * s
            nb = -(-n // block)
            base = list(range(s * 100_000, s * 100_000 + nb))
            hashes = base if n % block == 0 else [*base[:-1], s * 100_000 + 90_000 + k]
            reqs.append(
                {
                    "t": float(k),
                    "type": "s",
                    "model": "m",
                    "in": n,
                    "out": 24,
                    "hash_ids": hashes,
                    "input_types": ["text"],
                    "output_types": ["text"],
                    "stop": "tool_use",
                    "api_time": 0.5,
                    "think_time": 0.0,
                    "ttft": 0.1,
                }
            )
        lines.append(
            json.dumps(
                {
                    "id": f"cpu{s}",
                    "models": ["m"],
                    "block_size": block,
                    "hash_id_scope": "local",
                    "tool_tokens": 0,
                    "system_tokens": 0,
                    "requests": reqs,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")


def test_replay_run_rewrites_live_output_exactly(vllm_cpu: Any, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    write_trace(trace)
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "replay",
        "run",
        "--endpoint",
        f"vllm={vllm_cpu.url}",
        "--trace",
        str(trace),
        "--sessions",
        "2",
        "--duration-min",
        "0.75",
        "--window",
        "0-0.75",
        "--out",
        str(out),
        "--no-panel",
        "--seed",
        "3",
        "--reset-cache",  # the real engine's /reset_prefix_cache (issue 35, point 5)
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The engine is shared by the session's tests: the warm-cache guard may warn (and only it).
    assert "all 8 checks passed" in proc.stderr or (
        "ready (7 of 8 checks passed" in proc.stderr and "cold cache failed" in proc.stderr
    ), proc.stderr

    man = read_manifest(out)
    (eng,) = man.engines
    assert eng.block_size == vllm_cpu.block_size == 128
    assert eng.model == vllm_cpu.model and man.status == "completed"

    df = read_requests(out).sort_values("scheduled_s")
    ok = df[df.status == "ok"]
    assert len(ok) >= 6, df[["status", "error"]].to_string()
    block = eng.block_size
    checked = 0
    for _, g in ok.groupby("session"):
        rows = g.to_dict("records")
        for prev, cur in itertools.pairwise(rows):
            same = cur["trajectory"] == prev["trajectory"] and cur["turn"] == prev["turn"] + 1
            if not same or cur["priming"]:
                continue
            floor = (prev["prompt_tokens"] + prev["output_tokens"] - 1) // block * block
            assert cur["cached_tokens"] >= floor, (prev, cur)
            assert cur["ideal_cached_tokens"] >= prev["prompt_tokens"] + prev["output_tokens"] - 1
            checked += 1
    assert checked >= 3, ok[["session", "trajectory", "turn", "priming"]].to_string()
    # The engine's own counters agree that it hit (three hit rates reconciled in the summary).
    summary = json.loads((out / "summary.json").read_text())["engines"]["vllm"]
    assert summary["hit_rate"] > 0.3
    assert summary["counter_hit_rate"] is not None and summary["counter_hit_rate"] > 0.3
    # Phase hygiene against the real engine: reset after preflight, /metrics at each edge.
    done = json.loads((out / "manifest.json").read_text())["engines"][0]["cache_reset"]
    assert done["ok"] is True and done["route"] == "/reset_prefix_cache", done
    for phase in PHASES:
        text = snapshot_path(out, "vllm", phase).read_text()
        assert "vllm:prefix_cache_queries" in text, phase
