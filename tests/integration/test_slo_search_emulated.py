"""`replay slo-search --engines` (issue 35, point 3): a tiny search end to end through `replay
run`'s executor on the built-in emulators (the bundled sample, 4 modelled minutes at 120x, 1 to
3 sessions, two confirmation seeds; ~30 s on two cores). Every probe is a run directory under
OUT/probes judged by its own summary.json, the answer agrees with the probes, the confirmation
runs sit in OUT with their band, and the file and the printed answer say the emulators probed.
Emulated timing varies from run to run, so the test checks how the answer follows from the
runs, not one session count."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app

LIMIT = 3


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


def _summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text())["engines"]["vllm"]


def test_an_emulated_search_probes_through_replay_run_and_confirms_its_answer(
    tmp_path: Path,
) -> None:
    out = tmp_path / "search"
    res = CliRunner().invoke(
        app,
        ["slo-search", "--engines", "vllm", "--duration-min", "4", "--window", "1-4",
         "--time-scale", "120", "--start", "2", "--max-sessions", str(LIMIT),
         "--confirm-seeds", "2", "--slo", "ttft=4,itl=none", "--slo-share", "0.5",
         "--out", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, said(res)
    text = said(res)
    assert "emulated engines (replay run)" in text and "agents/GPU" in text
    assert "Probed by: emulated" in text, text[-600:]
    data = json.loads((out / "slo_search.json").read_text())
    assert data["executor"] == "emulated"
    (e,) = data["engines"]
    assert e["engine"] == "vllm" and e["policy"] == "vllm"
    # Every probe is a replay run of its own, judged by its summary's SLO share.
    for p in e["probes"]:
        run_dir = out / "probes" / f"vllm-s{p['sessions']}-seed0"
        got = _summary(run_dir)
        assert got["slo"]["ttft_s"] == 4 and got["slo"]["itl_s"] is None  # the search's SLO
        assert got["requests"] == p["requests"] > 0
        assert got["slo_request_share"] == pytest.approx(p["share"])
        assert p["met"] == (p["share"] >= 0.5)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["emulated"] is True and manifest["config"]["sessions"] == p["sessions"]
    probed = sorted(p["sessions"] for p in e["probes"])
    assert sorted(p.name for p in (out / "probes").iterdir()) == sorted(
        f"vllm-s{n}-seed0" for n in probed
    )
    met = {p["sessions"] for p in e["probes"] if p["met"]}
    failed = {p["sessions"] for p in e["probes"] if not p["met"]}
    # The answer follows from the probes: it held and one more failed (or it is the limit).
    if e["sessions"] == 0:
        assert 1 in failed and not met
        pytest.skip(f"no load met the tier on this machine's emulated run: {text}")
    assert e["sessions"] in met
    assert e["sessions"] + 1 in failed or (e["capped"] and e["sessions"] == LIMIT)
    assert e["agents_per_gpu"] == e["sessions"] / e["gpus"] and e["gpus"] == 2
    # The confirmation runs: one per seed at the answer, in OUT, their band in the file.
    assert [c["seed"] for c in e["confirm"]] == [0, 1]
    runs = sorted(p.parent.name for p in out.glob("*/summary.json"))
    assert runs == [f"vllm-s{e['sessions']}-seed0", f"vllm-s{e['sessions']}-seed1"]
    band = e["band"]
    assert band["executor"] == "emulated" and band["seeds"] == [0, 1]
    points = band["engines"][0]["points"]
    for c, point, run in zip(e["confirm"], points, runs, strict=True):
        got = _summary(out / run)
        assert c["share"] == pytest.approx(got["slo_request_share"])
        assert point["seed"] == c["seed"] and math.isclose(point["hit_rate"], got["hit_rate"])
    # The report's table says which executor probed.
    from analysis.report.catalog import make_tables
    from analysis.report.content import analyze
    from analysis.runs import load_run

    tables = make_tables(analyze([load_run(out / r) for r in runs]))
    (table,) = [t for t in tables if t.name == "slo_search"]
    assert "replay slo-search, emulated engines (replay run)" in table.note
    assert table.data["agents_per_gpu"].tolist() == [e["agents_per_gpu"]]


def test_a_live_search_probes_the_endpoint_it_was_given(tmp_path: Path) -> None:
    """`--endpoint NAME=URL`: each probe is `replay run --endpoint` against that server (here
    an emulator started by the test, standing for a real engine), recorded as live."""
    from replay.emulator.config import EmulatorConfig
    from replay.emulator.launch import start_emulators

    out = tmp_path / "live"
    cfg = EmulatorConfig(engine="vllm", port=0, time_scale=120.0, token_scale=16)
    with start_emulators([cfg]) as urls:
        res = CliRunner().invoke(
            app,
            ["slo-search", "--endpoint", f"mine=vllm@{urls['vllm']}", "--duration-min", "3",
             "--window", "1-3", "--time-scale", "120", "--start", "1", "--max-sessions", "2",
             "--confirm-seeds", "1", "--slo", "ttft=60,itl=none", "--out", str(out)],
        )  # fmt: skip
    assert res.exit_code == 0, said(res)
    assert "live engines (replay run)" in said(res)
    data = json.loads((out / "slo_search.json").read_text())
    assert data["executor"] == "live"
    (e,) = data["engines"]
    assert e["engine"] == "mine" and e["policy"] == "vllm"
    for p in e["probes"]:
        manifest = json.loads(
            (out / "probes" / f"mine-s{p['sessions']}-seed0" / "manifest.json").read_text()
        )
        assert manifest["executor"] == "live" and not manifest.get("emulated")
    if e["sessions"]:
        assert (out / f"mine-s{e['sessions']}-seed0" / "summary.json").is_file()
        assert e["band"]["executor"] == "live"
