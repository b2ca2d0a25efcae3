"""`replay slo-search` (issue 35, point 3) on the bundled sample with a tiny budget: it finds
an edge, confirms it on seeds, writes slo_search.json beside the confirmation runs and the
report shows it; bad inputs fail naming the flag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


def test_the_search_prints_agents_per_gpu_and_the_report_carries_it(tmp_path: Path) -> None:
    out = tmp_path / "search"
    res = invoke(
        "slo-search", "--policies", "vllm", "--duration-min", "3", "--start", "2",
        "--max-sessions", "16", "--confirm-seeds", "2", "--slo", "ttft=0.4",
        "--slo-share", "0.8", "--out", str(out),
    )  # fmt: skip
    assert res.exit_code == 0, said(res)
    text = said(res)
    assert "agents/GPU" in text and "TTFT ≤ 0.4 s" in text and "for ≥ 80% of requests" in text
    data = json.loads((out / "slo_search.json").read_text())
    (e,) = data["engines"]
    met = {p["sessions"] for p in e["probes"] if p["met"]}
    failed = {p["sessions"] for p in e["probes"] if not p["met"]}
    # The answer held on the search's seed, and the next count up failed (or is the limit).
    assert e["sessions"] in met and (e["sessions"] + 1 in failed or e["capped"])
    assert e["agents_per_gpu"] == e["sessions"] / e["gpus"]
    assert [p["seed"] for p in e["confirm"]] == [0, 1]
    assert len(e["band"]["engines"][0]["points"]) == 2
    runs = sorted(p.parent.name for p in out.glob("*/summary.json"))
    assert runs == [f"vllm-s{e['sessions']}-seed0", f"vllm-s{e['sessions']}-seed1"]
    summary = json.loads((out / runs[0] / "summary.json").read_text())["engines"]["vllm"]
    assert summary["slo"]["ttft_s"] == 0.4  # the runs are judged against the search's SLO
    assert summary["slo_request_share"] == pytest.approx(e["confirm"][0]["share"])

    from analysis.report.catalog import make_tables
    from analysis.report.content import analyze
    from analysis.runs import load_run

    tables = make_tables(analyze([load_run(out / r) for r in runs]))
    (table,) = [t for t in tables if t.name == "slo_search"]
    assert "agents per GPU" in table.title and "TTFT ≤ 0.4 s" in table.title
    assert table.data["agents_per_gpu"].tolist() == [e["agents_per_gpu"]]
    assert "artificialanalysis.ai/methodology/agentperf" in table.note  # its source


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--slo-share", "1.5"], "--slo-share: 1.5 is not a share in (0, 1]"),
        (["--slo-share", "0"], "--slo-share: 0 is not a share in (0, 1]"),
        (["--start", "0"], "--start: must be at least 1 session"),
        (["--start", "9", "--max-sessions", "4"], "--max-sessions: 4 is below --start 9"),
        (["--confirm-seeds", "0"], "--confirm-seeds: must be at least 1"),
        (["--slo", "ttft=abc"], "--slo 'ttft=abc': ttft must be a number or none"),
        (["--slo", "speed=3"], "--slo 'speed=3': expected KEY=VALUE"),
        (["--slo", "ttft=none,itl=none"], "--slo 'ttft=none,itl=none': sets no request bound"),
        (["--duration-min", "-1"], "--duration-min: must be positive"),
    ],
)
def test_bad_inputs_name_the_flag(tmp_path: Path, args: list[str], message: str) -> None:
    res = invoke("slo-search", "--policies", "vllm", "--out", str(tmp_path / "o"), *args)
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), said(res)
    assert message in said(res)
    assert not (tmp_path / "o").exists()  # refused before anything is written


def test_an_unknown_policy_is_named(tmp_path: Path) -> None:
    res = invoke("slo-search", "--policies", "nope", "--out", str(tmp_path / "o"))
    assert res.exit_code == 2 and "--policies: unknown policy nope" in said(res)
