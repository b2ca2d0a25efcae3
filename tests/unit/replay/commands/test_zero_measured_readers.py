"""The commands that read a simulated run's figures, on runs that measured no request (the
bundled sample for 3 seconds: only the priming requests, none with its first token inside the
window): `replay slo-search` fails such a probe and says why, its band leaves such a seed out,
and `replay plan-host` shows – (never 0.0) and never marks such a row best. And slo-search's
refusal of an unknown engine names only its own options."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analysis.slo_search import EngineAnswer, Probe
from replay.cli import app
from replay.commands.slo_search import _band
from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace, sample_path

BLIND = ["--duration-min", "0.05"]  # 3 s, measured over 1-3 s: nothing measured
NOTHING = "none finished ok with its first token inside the window"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


def test_slo_search_fails_probes_that_measured_nothing_and_says_why(tmp_path: Path) -> None:
    out = tmp_path / "search"
    res = invoke("slo-search", "--policies", "vllm", *BLIND, "--start", "2", "--max-sessions",
                 "4", "--confirm-seeds", "1", "--out", str(out))  # fmt: skip
    assert res.exit_code == 0, said(res)
    (e,) = json.loads((out / "slo_search.json").read_text())["engines"]
    assert e["probes"] and all(p["requests"] == 0 and not p["met"] for p in e["probes"])
    assert e["sessions"] == 0 and e["band"] is None
    text = said(res)
    assert f"vllm: no probe measured a request ({NOTHING}), so none could meet the SLO" in text
    assert "lengthen --duration-min or move --window" in text
    assert "not even one session met the SLO" not in text  # the load was not the reason


def test_a_confirmation_seed_that_measured_nothing_is_named_and_has_no_band_point() -> None:
    base = SimConfig(policy="vllm", sessions=2, timing="engine", token_scale=16.0, warmup_s=0.0,
                     duration_s=3.0, window=(1.0, 3.0))  # fmt: skip
    sample = load_trace(sample_path())
    blind = simulate(sample, replace(base, seed=1))
    seen = simulate(sample, replace(base, seed=0, duration_s=360.0, window=(120.0, 360.0)))
    assert blind.summary["requests"] == 0 < seen.summary["requests"]
    probe = Probe(2, 0, seen.summary["requests"], 1.0, True)
    answer = EngineAnswer("vllm", "vllm", 2, 2, False, [probe],
                          confirm=[probe, Probe(2, 1, 0, float("nan"), False)])  # fmt: skip
    band = _band(answer, [blind, seen])
    assert band is not None and band["seeds"] == [0]
    (points,) = [e["points"] for e in band["engines"]]
    assert [p["seed"] for p in points] == [0] and points[0]["hit_rate"] > 0
    assert _band(answer, [blind]) is None  # no seed measured anything: no band
    from replay.commands.slo_search import _unmeasured

    (note,) = _unmeasured(answer)
    assert note.startswith("vllm: confirmation seed(s) 1 measured no request at 2 sessions")


def test_plan_host_shows_a_dash_and_marks_no_best_where_nothing_was_measured(
    tmp_path: Path,
) -> None:
    out = tmp_path / "plan"
    res = invoke("plan-host", "--sessions", "2", *BLIND, "--host-gb", "0,64", "--out", str(out))
    assert res.exit_code == 0, said(res)
    rows = json.loads((out / "plan_host.json").read_text())
    assert [r["host_gb"] for r in rows] == [0, 64]
    for r in rows:
        assert r["requests"] == 0 and not r["best"]
        assert r["hit_rate"] is None and r["host_hit_rate"] is None and r["ttft_p50_s"] is None
    lines = [ln.split() for ln in res.output.splitlines() if ln.strip().startswith("sglang")]
    assert len(lines) == 2
    for cells in lines:
        assert "0.0%" not in cells and "◀" not in cells
        assert cells[-6:] == ["–"] * 6  # hit, host, p50, p90, profit, net
    assert "2 of 2 points measured no request" in said(res)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engines", "nope"], "give its kind with --endpoint nope=KIND@URL"),
        (["--endpoint", "nope=http://127.0.0.1:9"], "give its kind with --endpoint nope=KIND@URL"),
        (["--engines", ""], "names no engine; give e.g. --engines flashstate,vllm"),
    ],
)
def test_slo_search_refuses_an_unknown_engine_naming_only_its_own_options(
    tmp_path: Path, args: list[str], message: str
) -> None:
    res = invoke("slo-search", *args, "--out", str(tmp_path / "o"))
    assert res.exit_code == 2, said(res)
    text = said(res)
    assert message in text
    assert "--config" not in text  # replay run's option: slo-search has none
    assert "leave --engines out" not in text  # without it slo-search asks for --policies
    assert not (tmp_path / "o").exists()
