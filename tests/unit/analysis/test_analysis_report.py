"""`replay report` and `analysis.report`: table numbers, citations, formats, errors."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analysis.report import ReportError, build_report
from analysis.report.export import NO_BROWSER
from analysis.report.tables import Column, Table, format_value, tex_escape
from replay.cli import app

Builder = Callable[[], Any]

MANIFEST = {
    "harness_version": "0.1.0+test",
    "trace": {"path": "traces/sample.jsonl.gz", "sha256": "ab" * 32},
    "config": {"window": [0, 120], "sessions": 2, "seed": 7},
    "engines": [
        {
            "name": "a",
            "gpus": 1,
            "gpu_type": "B200",
            "kind": "vllm",
            "model": "glm-5.3-flash",
            "server_version": "vllm 0.32.0",
            "flags": ["--enable-prefix-caching", "--enable-prompt-tokens-details"],
        },
        {"name": "b", "gpus": 2, "gpu_type": "H100", "server_version": "sglang 0.9"},
    ],
}


def _run(builder: Builder, name: str = "run", sessions: int = 2) -> Path:
    b = builder()
    # engine a: 60 output tokens per minute each minute, hit rate 600/1000 and 700/1000
    b.req("a", 5.0, first=10.0, done=10.0, output=60, prompt=1000, cached=600, ideal=900)
    b.req("a", 65.0, first=70.0, done=70.0, output=60, prompt=1000, cached=700, ideal=900, turn=1)
    b.req("b", 5.0, first=12.0, done=12.0, output=240, prompt=2000, cached=500, ideal=1800)
    b.req("b", 65.0, first=75.0, done=75.0, output=240, prompt=2000, cached=500, ideal=1800, turn=1)
    manifest = json.loads(json.dumps(MANIFEST))
    manifest["config"]["sessions"] = sessions
    return b.write(name, **manifest)


def _csv(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="") as f:
        return {row["engine"]: row for row in csv.DictReader(f)}


def test_table_numbers_match_hand_computed(builder: Builder, tmp_path: Path) -> None:
    run_dir = _run(builder)
    out = tmp_path / "rep"
    result = build_report([run_dir], out, "md,tex", figures=False)
    t = _csv(out / "tables" / "throughput.csv")
    assert float(t["a"]["output_tokens_per_min_per_gpu"]) == pytest.approx(60.0)
    assert float(t["a"]["output_tokens_per_min_per_gpu_se"]) == pytest.approx(0.0)
    assert float(t["b"]["output_tokens_per_min_per_gpu"]) == pytest.approx(120.0)  # 2 GPUs
    assert float(t["a"]["prefill_tokens_per_min_per_gpu"]) == pytest.approx(1000.0)
    assert float(t["a"]["hit_rate"]) == pytest.approx(0.65)
    assert float(t["a"]["hit_rate_se"]) == pytest.approx(0.05)  # bins 0.6, 0.7
    assert float(t["b"]["hit_rate"]) == pytest.approx(0.25)
    lat = _csv(out / "tables" / "latency.csv")
    assert float(lat["a"]["ttft_p50"]) == pytest.approx(5.0)
    assert float(lat["b"]["ttft_p50"]) == pytest.approx(8.5)
    econ = _csv(out / "tables" / "economics.csv")
    assert econ["a"]["gpu"] == "B200" and econ["b"]["gpu"] == "H100"
    # (1 - 0.65) x 0.15 + 0.65 x 0.03
    assert float(econ["a"]["user_cost_per_m_input"]) == pytest.approx(0.072)
    md = (out / "tables" / "throughput.md").read_text()
    assert "| Output (tok/min/GPU) |" in md
    # InferenceX total: (2 × 1000 prompt + 2 × 60 output) tokens ÷ 65 s (sent 5, done 70)
    assert "| a | 2 | 1 | 2 | 60 ± 0 | 1,000 ± 0 | 33 | 65.0 ± 5.0 | 90.0 |" in md
    # The field's figures name their sources beside the table (issue 35).
    assert "SemiAnalysisAI/InferenceX" in md and "compute_throughput_stats" in md
    assert "weka_metric_prepass.py" in md
    tex = (out / "tables" / "throughput.tex").read_text()
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
    assert "Hit rate (\\%)" in tex and "Output (tok/min/GPU)" in tex
    assert "\\begin{tabular}{lrrrrrrrrrrr}" in tex
    assert "65.0 $\\pm$ 5.0" in tex
    assert not (out / "report.html").exists()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["engines"]["a"]["hit_rate"] == pytest.approx(0.65)
    # Priced at the catalogue's default sheet whatever the report's, so every writer agrees.
    assert summary["engines"]["a"]["sheet"] == "zai-glm"
    assert summary["engines"]["a"]["user_cost_per_m_input"] == pytest.approx(0.072)
    assert any(p.name == "summary.json" for p in result.files)


def test_report_md_cites_the_manifest(builder: Builder, tmp_path: Path) -> None:
    out = tmp_path / "rep"
    build_report([_run(builder)], out, "md", figures=False)
    md = (out / "report.md").read_text()
    for text in (
        "traces/sample.jsonl.gz",
        "ab" * 32,
        "**Seed:** `7`",
        "0.1.0+test",
        "vllm 0.32.0",
        "--enable-prefix-caching --enable-prompt-tokens-details",
        "sglang 0.9",
        "`2× H100`",
        "0–120 s (manifest config.window)",
    ):
        assert text in md, text
    assert "**Command:** `not recorded`" in md


def test_no_browser_skips_static_and_writes_the_rest(
    builder: Builder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLAY_CHROMIUM", "")
    out = tmp_path / "rep"
    result = build_report([_run(builder)], out)
    assert result.static_skipped == NO_BROWSER
    assert "apt-get install -y chromium" in NO_BROWSER
    assert (out / "report.html").stat().st_size > 1_000_000  # plotly.js inlined
    assert (out / "figures" / "ttft_cdf.json").exists()
    assert not list((out / "figures").glob("*.png"))
    md = (out / "report.md").read_text()
    assert "figures/ttft_cdf.json" in md
    html = (out / "report.html").read_text()
    assert NO_BROWSER.split(":")[0] in html
    assert "<script src=" not in html  # nothing fetched from a CDN
    assert (out / "report.tex").exists()


def test_sweep_over_a_folder_of_runs(builder: Builder, tmp_path: Path) -> None:
    _run(builder, "sweep/s2", sessions=2)
    _run(builder, "sweep/s4", sessions=4)
    out = tmp_path / "rep"
    res = CliRunner().invoke(
        app, ["report", str(tmp_path / "sweep"), "--out", str(out), "--no-figures"]
    )
    assert res.exit_code == 0, res.output
    with open(out / "tables" / "sweep.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted((r["engine"], r["sessions"]) for r in rows) == [
        ("a", "2"),
        ("a", "4"),
        ("b", "2"),
        ("b", "4"),
    ]
    flat = res.output.replace("\n", "")  # rich wraps a long path anywhere
    assert "wrote" in flat and "report.md" in flat
    assert (out / "tables" / "throughput.md").read_text().count("| s") >= 2  # run column


def test_an_engine_gpu_without_a_rate_is_named(builder: Builder, tmp_path: Path) -> None:
    """The report prices by the one rule: a manifest GPU with no rate stops it, naming the
    engine, the GPU and --gpu; --gpu prices it."""
    run_dir = _run(builder)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["engines"][0]["gpu_type"] = "TPU9"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    res = CliRunner().invoke(app, ["report", str(run_dir), "--out", str(tmp_path / "r"),
                                   "--no-figures"])  # fmt: skip
    assert res.exit_code == 2, res.output
    message = " ".join(res.output.split())
    assert "engine 'a' runs on GPU 'TPU9'" in message and "pass --gpu NAME" in message
    res = CliRunner().invoke(app, ["report", str(run_dir), "--out", str(tmp_path / "r"),
                                   "--no-figures", "--gpu", "h100"])  # fmt: skip
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["MISSING"], "no such directory"),
        (["RUN", "--format", "md,pdf"], "--format: unknown pdf; choose from md,tex,html"),
        (["RUN", "--sheet", "nope"], "pricing: unknown price sheet 'nope'"),
        (["RUN", "--gpu", "nope"], "pricing: --gpu: unknown GPU 'nope'; choose one of: b200"),
        (["RUN", "--window", "9-3"], "--window 9-3: need 0 ≤ A < B (minutes)"),
        (["RUN", "--window", "x"], "--window x: expected A-B in minutes of the run"),
        (["EMPTY"], "holds no manifest.json, and no run directories under it"),
        (["RUN", "--out-file"], "exists and is not a directory"),
    ],
)
def test_cli_errors_are_readable(
    builder: Builder, tmp_path: Path, args: list[str], message: str
) -> None:
    run_dir = _run(builder)
    (tmp_path / "empty").mkdir()
    (tmp_path / "afile").write_text("x")
    subst = {
        "RUN": str(run_dir),
        "MISSING": str(tmp_path / "nope"),
        "EMPTY": str(tmp_path / "empty"),
    }
    argv = [subst.get(a, a) for a in args if a != "--out-file"]
    out = tmp_path / "afile" if "--out-file" in args else tmp_path / "rep"
    res = CliRunner().invoke(app, ["report", *argv, "--out", str(out), "--no-figures"])
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split()), res.output


def test_report_error_without_runs(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no run directories given"):
        build_report([], tmp_path / "rep")


def test_format_value_and_escape() -> None:
    pct = Column("h", "Hit", "%", "pct", 1)
    assert format_value(0.8734, pct, "md") == "87.3"
    assert format_value(float("nan"), pct, "md") == "–"
    assert format_value(None, pct, "tex") == "--"
    usd = Column("p", "Profit", "$/GPU-h", "usd", 2)
    assert format_value(-1.204, usd, "md") == "-$1.20"
    assert format_value(1234.5, Column("n", "N", kind="int"), "md") == "1,234"
    assert format_value(1234.5, Column("n", "N", kind="int"), "tex") == "1234"
    assert format_value(2.0, Column("r", "R", kind="ratio", digits=2), "tex") == "2.00$\\times$"
    assert tex_escape("a_b & 50% ≥ $1") == "a\\_b \\& 50\\% $\\geq$ \\$1"


def test_table_html_escapes() -> None:
    import pandas as pd

    t = Table("t", "T <x>", pd.DataFrame({"e": ["<b>"]}), [Column("e", "E", kind="text")])
    assert "&lt;b&gt;" in t.to_html() and "T &lt;x&gt;" in t.to_html()


def test_runs_without_measured_requests_still_report(builder: Builder, tmp_path: Path) -> None:
    empty = builder().write("empty", config={"window": [0, 100]})
    b = builder()
    b.req("a", 10.0, status="error")
    b.rows[-1].first_token_s = b.rows[-1].done_s = None
    b.req("b", 10.0)
    errors = b.write("errors", config={"window": [0, 100]})
    result = build_report([empty, errors], tmp_path / "rep", static=False)
    assert "errors: a: not priced: no served requests in the window" in result.notes
    assert (tmp_path / "rep" / "report.html").exists()
    lat = (tmp_path / "rep" / "tables" / "latency.md").read_text()
    assert "| errors | a | – |" in lat  # no TTFT: a dash, not a crash


def test_custom_window_leaves_the_summary_on_the_manifest_window(
    builder: Builder, tmp_path: Path
) -> None:
    run_dir = _run(builder)
    build_report([run_dir], tmp_path / "rep", "md", window=(0, 60), figures=False)
    t = _csv(tmp_path / "rep" / "tables" / "throughput.csv")
    assert float(t["a"]["hit_rate"]) == pytest.approx(0.6)  # the first minute only
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["window"] == [0.0, 120.0]
    assert summary["engines"]["a"]["hit_rate"] == pytest.approx(0.65)


def test_paired_across_runs_of_the_same_seeded_workload(builder: Builder, tmp_path: Path) -> None:
    cfg = {"window": [0, 100], "sessions": 1, "seed": 5}
    for engine, cached in (("a", 900), ("b", 600)):
        b = builder()
        for turn in range(3):
            b.req(engine, 10.0 * turn, turn=turn, prompt=1000, cached=cached + 10 * turn)
        b.write(f"sweep/{engine}", engines=[{"name": engine, "gpus": 1}], config=cfg)
    other = (
        builder().req("c", 5.0).write("sweep/c", engines=[{"name": "c"}], config={**cfg, "seed": 6})
    )
    assert other.exists()
    out = tmp_path / "rep"
    build_report([tmp_path / "sweep" / n for n in ("a", "b", "c")], out, "md", figures=False)
    with open(out / "tables" / "paired_across_runs.csv", newline="") as f:
        rows = {r["quantity"]: r for r in csv.DictReader(f)}
    cached = rows["cached_tokens"]
    assert (cached["engine"], cached["reference"], cached["pairs"]) == ("a", "b", "3")
    assert float(cached["mean_delta"]) == pytest.approx(300.0)  # c has another seed: no pairs


def test_report_window_is_in_minutes(builder: Builder, tmp_path: Path) -> None:
    """`--window` is in minutes as on `replay run`: 0-1 is the first minute (0-60 s)."""
    run_dir = _run(builder)
    res = CliRunner().invoke(
        app, ["report", str(run_dir), "--out", str(tmp_path / "rep"), "--no-figures",
              "--window", "0-1", "--format", "md"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    t = _csv(tmp_path / "rep" / "tables" / "throughput.csv")
    assert float(t["a"]["hit_rate"]) == pytest.approx(0.6)  # the first minute only


def test_a_broken_run_in_a_folder_is_named_and_the_rest_reported(
    builder: Builder, tmp_path: Path
) -> None:
    _run(builder, "sweep/s2", sessions=2)
    bad = _run(builder, "sweep/s4", sessions=4)
    journal = bad / "requests.jsonl"
    journal.write_bytes(journal.read_bytes() + b'{"engine": "a", "status" \n')
    (bad / "requests.parquet").unlink()  # the journal is then the only record
    out = tmp_path / "rep"
    res = CliRunner().invoke(app, ["report", str(tmp_path / "sweep"), "--out", str(out),
                                   "--no-figures", "--format", "md"])  # fmt: skip
    text = " ".join(res.output.split())
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "skipped a run:" in text and "requests.jsonl: line 5 is not valid JSON" in text
    assert "1 of 2 runs were left out" in text
    assert (out / "report.md").exists()
    res = CliRunner().invoke(app, ["price", str(bad)])
    assert res.exit_code == 2
    assert "requests.jsonl: line 5 is not valid JSON" in " ".join(res.output.split())


def test_faults_and_a_stale_run_are_flagged_in_the_report(builder: Builder, tmp_path: Path) -> None:
    b = builder()
    for k in range(10):
        b.req("a", 5.0 + k, status="ok" if k < 8 else "error")
        b.req("b", 5.0 + k)
    events = [{"event": "engine_down", "engine": "a", "start_s": 12.5, "end_s": 30.0,
               "detail": "GET /health failed (ClientConnectorError)"}]  # fmt: skip
    run_dir = b.write(
        "faulty", config={"window": [0, 60]}, events=events, emulator_restarts={"a": 1}
    )
    man = json.loads((run_dir / "manifest.json").read_text())
    man["status"] = "running"  # a run killed before its end...
    (run_dir / "manifest.json").write_text(json.dumps(man))
    (run_dir / "writer.lock").write_text('{"pid": 1, "start": "2026-01-01T00:00:00+00:00"}')
    result = build_report([run_dir], tmp_path / "rep", "md", figures=False)
    notes = " ".join(result.notes)
    assert "a: engine down from 12.5 s to 30 s" in notes
    assert "a: the emulator died and the harness restarted it 1 time(s)" in notes
    assert "a: 20.0% of requests in the window failed (over 5%): degraded" in notes
    assert "interrupted (stale)" in notes  # ...whose lock nobody holds
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "interrupted (stale)" in md
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["engines"]["a"]["error_flagged"] and not summary["engines"]["b"]["error_flagged"]


@pytest.mark.rundir_unchecked
def test_a_wrong_typed_manifest_window_is_shown_whole(builder: Builder, tmp_path: Path) -> None:
    """Brackets in a message are text, not console markup ("a window is , got 'abc'")."""
    b = builder()
    b.req("a", 5.0)
    run_dir = b.write("w")
    data = json.loads((run_dir / "manifest.json").read_text())
    data["config"] = {"window": "abc"}
    (run_dir / "manifest.json").write_text(json.dumps(data))
    for argv in (["report", str(run_dir), "--out", str(tmp_path / "rep")], ["price", str(run_dir)]):
        res = CliRunner().invoke(app, argv)
        assert res.exit_code == 2
        assert "a window is [start_s, end_s], got 'abc'" in " ".join(res.output.split())
