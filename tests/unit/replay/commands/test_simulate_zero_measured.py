"""`replay simulate` through the real command line on runs that measured no request (the
bundled sample for 3 seconds, measured over 1-3 s: only the priming requests, none with its
first token inside the window): summary.csv leaves the figures over measured requests empty,
and the table shows – for them, never 0.0%, and says why."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from replay.cli import app

BLIND = ["--sessions", "2", "--duration-min", "0.05"]  # window 1-3 s: nothing measured


def simulate(*args: str) -> Any:
    return CliRunner().invoke(app, ["simulate", *args])


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


def test_the_table_and_summary_csv_show_nothing_measured_as_missing(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    res = simulate("--policies", "flashstate,sglang", *BLIND, "--timing", "engine",
                   "--host-memory-gb", "64", "--out", str(out))  # fmt: skip
    assert res.exit_code == 0, said(res)
    with (out / "summary.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["policy"] for r in rows] == ["flashstate", "sglang"]
    for r in rows:
        assert r["requests"] == "0"
        for key in ("hit_rate", "ideal_hit_rate", "redundant_prefill_per_request",
                    "ttft_p50_s", "latency_mean_s", "host_hit_share"):  # fmt: skip
            assert r[key] == "", (key, r[key])  # empty, not 0.0
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("│")]
    assert len(lines) == 2
    for ln in lines:
        cells = [c.strip() for c in ln.strip("│").split("│")]
        # requests, hit, of it host, ideal, redundant/req: the count, then four dashes
        assert cells[3:8] == ["0", "–", "–", "–", "–"], cells
        assert "0.0%" not in ln
    assert "2 of 2 runs measured no request" in said(res)


def test_json_rows_have_null_where_nothing_was_measured(tmp_path: Path) -> None:
    res = simulate("--policies", "vllm", *BLIND, "--json", "--out", str(tmp_path / "o"))
    assert res.exit_code == 0, said(res)
    (row,) = json.loads(res.stdout)
    assert row["requests"] == 0 and row["hit_rate"] is None and row["ideal_hit_rate"] is None
