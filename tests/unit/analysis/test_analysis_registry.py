"""The metric registry (replay.metric_registry, read through analysis.registry) is the one
catalog: a real summary.json holds its keys and nothing else, every key meant for the summary
is produced (or null, with the registry's reason, where the executor cannot know it), and the
final table, the report's tables and the dashboard's pages list exactly its metrics. Adding a
metric is one entry: a new entry appears in every view it names and in the typed summary."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from analysis import load_run
from analysis.registry import (
    EXECUTORS,
    METRICS,
    executor_of,
    figure_label,
    header,
    in_view,
    keys,
    row_title,
    summary_keys,
    text,
    unknown_to,
)
from replay.cli import app
from replay.metric_registry import NOT_LIVE_REASON, TRACE_TIMING_REASON, metric
from replay.rundir import read_summary
from replay.rundir_models import EngineSummary, Manifest

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "replay" / "data" / "sample-weka.jsonl.gz"


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two short simulations of the bundled sample: engine timing and trace timing."""
    out: dict[str, Path] = {}
    for timing in ("engine", "trace"):
        root = tmp_path_factory.mktemp(timing)
        res = CliRunner().invoke(
            app,
            [
                "simulate", "--trace", str(SAMPLE), "--policies", "vllm", "--sessions", "4",
                "--duration-min", "5", "--timing", timing, "--out", str(root),
            ],
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        (run,) = [p.parent for p in root.glob("*/summary.json")]
        out[timing] = run
    return out


def _engine(run: Path) -> dict[str, Any]:
    data = json.loads((run / "summary.json").read_text())
    (entry,) = data["engines"].values()
    return dict(entry)


def test_a_real_summary_holds_the_registry_keys_and_nothing_else(sims: dict[str, Path]) -> None:
    for timing, run in sims.items():
        entry = _engine(run)
        always = {k for k in summary_keys() if not metric(k.removesuffix("_se")).only_when}
        assert always <= set(entry), timing  # every metric is produced (or null)
        assert set(entry) <= set(summary_keys()), timing  # and nothing unregistered
        summary = read_summary(run)
        assert summary is not None
        (typed,) = summary.engines.values()
        assert not typed.model_extra, f"{timing}: keys outside the registry: {typed.model_extra}"


def test_what_an_executor_cannot_know_is_null_with_the_registry_reason(
    sims: dict[str, Path],
) -> None:
    engine, trace = _engine(sims["engine"]), _engine(sims["trace"])
    assert executor_of(load_run(sims["trace"]).manifest) == "sim-trace"
    assert executor_of(load_run(sims["engine"]).manifest) == "sim-engine"
    assert trace["unknown"] == unknown_to("sim-trace")
    assert engine["unknown"] == unknown_to("sim-engine") == {"drift": NOT_LIVE_REASON}
    for key, why in unknown_to("sim-trace").items():
        assert trace[key] is None and why in (TRACE_TIMING_REASON, NOT_LIVE_REASON), key
    # The same metrics an engine clock does know (this short run has every throughput).
    for key in ("output_tokens_per_min_per_gpu", "ttft_p50", "slo_request_share"):
        assert isinstance(engine[key], float) and math.isfinite(engine[key]), key
    assert not unknown_to("live") and not unknown_to("emulated")
    assert set(metric("drift").known_by) == {"live", "emulated"}


def test_executor_of_reads_the_manifest() -> None:
    def kind(**kw: Any) -> str:
        return executor_of(Manifest.model_validate(kw))

    assert kind(executor="live") == "live"
    assert kind(executor="live", emulated=True) == "emulated"
    assert kind(executor="simulator", config={"timing": "engine"}) == "sim-engine"
    assert kind(executor="simulator", config={"timing": "trace"}) == "sim-trace"
    assert kind(executor="simulator") == "sim-trace"  # the simulator's default clock
    assert set(EXECUTORS) == {"live", "emulated", "sim-engine", "sim-trace"}


def test_engine_summary_is_typed_by_the_registry() -> None:
    fields = EngineSummary.model_fields
    assert set(fields) == set(summary_keys())
    assert fields["requests"].annotation == int | None
    assert fields["hit_rate"].annotation == float | None
    with pytest.raises(ValueError, match="requests"):
        EngineSummary.model_validate({"requests": "many"})
    # Only what a producer set is written; an executor's own key is kept as it is.
    e = EngineSummary.model_validate({"hit_rate": 0.5, "resident_checkpoints": 17})
    assert e.model_dump() == {"hit_rate": 0.5, "resident_checkpoints": 17}
    assert e.get("ttft_p50", "absent") == "absent" and e["resident_checkpoints"] == 17


def test_the_final_table_lists_the_registry_final_view(sims: dict[str, Path]) -> None:
    from replay.commands.final_table import final_table

    summary = json.loads((sims["engine"] / "summary.json").read_text())
    outcome = SimpleNamespace(summary=summary, run_dir=sims["engine"], status="completed")
    table = final_table(outcome)  # type: ignore[arg-type]
    rows = list(table.columns[0]._cells)
    # A metric produced under a condition (`only_when`) no engine meets has no row.
    engines = summary["engines"].values()
    shown = [m for m in in_view("final") if not m.only_when or any(m.key in e for e in engines)]
    assert rows == [row_title(m) for m in shown]
    assert "counter host+store hit" not in rows  # no engine counters with tiers
    # The titles the run's output is known by (tests/unit/replay/client/test_client_cli.py).
    for title in ("hit rate", "saturated", "task latency p50 s", "SLO requests"):
        assert title in rows
    assert "goodput out tok/min/GPU" in rows


def test_the_report_tables_list_the_registry_report_views(sims: dict[str, Path]) -> None:
    from analysis.report.catalog import make_tables
    from analysis.report.content import analyze

    tables = {t.name: t for t in make_tables(analyze([load_run(sims["engine"])]))}
    lead = {"engine", "saturation_text", "queue_busy_share", "drift_text"}
    for name in ("throughput", "latency", "misses", "economics", "verdicts", "fidelity"):
        shown = [c.key for c in tables[name].columns if c.key not in lead]
        shown = [k for k in shown if not k.startswith("drift_")]
        # The economics table's host-memory columns only where an engine has host memory
        # (this run has none): a metric produced under a condition is shown when produced.
        listed = [m for m in in_view(f"report.{name}") if name != "economics" or not m.only_when]  # type: ignore[arg-type]
        assert shown == [m.key for m in listed], name
        heads = [c.header("md") for c in tables[name].columns if c.key in keys(f"report.{name}")]  # type: ignore[arg-type]
        assert heads == [header(m) for m in listed]
    rollup = tables["by_turn_depth"]
    assert [c.key for c in rollup.columns][2:] == list(keys("report.rollup"))
    from analysis.report.content import COMPARED

    assert keys("report.significance") == COMPARED


def test_the_dashboard_pages_list_the_registry_views() -> None:
    from analysis.comparison import PANEL as COMPARISON
    from analysis.sweeps import SWEEP_METRICS
    from analysis.uncertainty import SE_METRICS
    from dashboards.timeline import PANEL
    from dashboards.verdicts import COLUMNS
    from dashboards.views import compare, pricing_whatif

    assert ("engine", *keys("compare")) == compare.TABLE_COLUMNS
    assert [f[0] for f in compare.FIGURES] == list(keys("compare.figure"))
    assert next(f[1] for f in compare.FIGURES) == "Output tokens/min/GPU"  # the browser test's
    assert ("engine", *keys("pricing")) == pricing_whatif.TABLE
    assert [p.key for p in PANEL] == list(keys("panel"))
    assert [p.label for p in PANEL][:1] == ["Output/min/GPU"]
    assert list(COLUMNS)[1:] == list(keys("verdicts"))
    assert [p[0] for p in COMPARISON] == list(keys("comparison"))
    assert keys("sweep") == SWEEP_METRICS
    assert tuple(m.key for m in METRICS if m.se) == SE_METRICS
    assert set(SE_METRICS) <= set(SWEEP_METRICS)


def test_every_metric_is_described_and_rendered() -> None:
    for m in METRICS:
        assert m.label and m.description, m.key
        assert m.views or m.summary, f"{m.key}: neither stored nor shown"
        assert m.plain_in <= m.views and not (m.plain_in and not m.se), m.key
        assert text(m, None) in ("–", "n/a")
        if m.fmt not in ("text", "json", "flag", "bool"):
            assert text(m, 1.5) not in ("–", ""), m.key
    assert figure_label(metric("hit_rate")) == "Hit rate (%)"
    assert text(metric("saturated"), True) == "YES" and text(metric("drift"), None) == "n/a"
    assert text(metric("drift"), {"flagged": False}) == "none"


def test_warning_severity_is_data() -> None:
    from analysis.summary import engine_warnings

    row = {
        "requests": 0,
        "saturated": True,
        "saturation": {"reasons": ["queue"]},
        "drift": {"flagged": True, "reasons": ["lengths"]},
        "warm_start_flagged": True,
        "warm_start_excess_hit_rate": 0.2,
    }
    got = {w.metric: w.severity for w in engine_warnings("e", row)}
    assert got == {
        "requests": "warning",
        "saturated": "error",
        "drift": "warning",
        "warm_start_flagged": "warning",
    }
    assert all(metric(k).severity == s for k, s in got.items())


def test_adding_a_metric_is_one_registry_entry(tmp_path: Path) -> None:
    """A new entry (in a fresh interpreter, added before anything reads the registry) is a
    typed summary field, a row of the final table, a column of the report's throughput
    table, the dashboard's compare table and the sweep, without another edit."""
    script = textwrap.dedent(
        """
        import replay.metric_registry as reg
        new = reg.Metric("queue_depth_mean", "Queue depth", "req", digits=1, better="lower",
                         description="requests waiting, mean", views=frozenset(
                             {"final", "report.throughput", "compare", "sweep"}))
        reg.METRICS = (*reg.METRICS, new)
        reg.BY_KEY[new.key] = new
        from replay.rundir_models import EngineSummary
        from analysis.summary import _SUMMARY_COLUMNS
        from analysis.sweeps import SWEEP_METRICS
        from analysis.report.catalog import _cols
        from dashboards.views.compare import TABLE_COLUMNS
        from analysis.registry import in_view, row_title
        assert EngineSummary.model_fields["queue_depth_mean"].annotation == float | None
        assert "queue_depth_mean" in _SUMMARY_COLUMNS
        assert "queue_depth_mean" in SWEEP_METRICS and "queue_depth_mean" in TABLE_COLUMNS
        assert _cols("report.throughput")[-1].key == "queue_depth_mean"
        assert row_title(in_view("final")[-1]) == "queue depth req"
        print("ok")
        """
    )
    res = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr


def test_the_metrics_page_is_the_registry() -> None:
    from analysis.registry_doc import DOC_PAGE, catalog_markdown, catalog_section

    assert ROOT / "docs" / "metrics.md" == DOC_PAGE
    section = catalog_section(DOC_PAGE.read_text(encoding="utf-8"))
    assert section is not None, "docs/metrics.md lost its metric-registry markers"
    assert section == catalog_markdown(), (
        "docs/metrics.md's table differs from replay/metric_registry.py: run "
        "`python -m analysis.registry_doc`"
    )
    assert all(f"| `{m.key}`" in section for m in METRICS)
