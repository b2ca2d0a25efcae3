"""The report says what its numbers are (issue 32): the provenance in every format's header,
the seed band where the run has one, figure captions with the provenance, and LaTeX whose
compiled text carries the warnings and the run's details (rendered here with pylatexenc's
LaTeX-to-text, which drops comments as TeX does; no TeX installation is needed)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pylatexenc.latex2text import LatexNodes2Text

from analysis.report import build_report
from analysis.report.content import analyze
from analysis.report.document import render_html, render_markdown, render_tex
from analysis.runs import load_run
from replay.band import Band, EngineBand, SeedPoint, write_band

Builder = Callable[[], Any]
MANIFEST = {
    "executor": "live",
    "emulated": True,
    "seed": 7,
    "harness_version": "0.1.0+test",
    "trace": {"path": "replay/data/sample-weka.jsonl.gz", "token_scale": 16.0},
    "config": {"window": [0, 120], "duration_s": 120, "sessions": 37, "seed": 7,
               "token_scale": 16.0, "time_scale": 30.0},
    "engines": [{"name": "a", "gpus": 2, "gpu_type": "B200",
                 "flags": ["model_profile=glm-5.3-flash"]}],
}  # fmt: skip


def _run(builder: Builder) -> Path:
    b = builder()
    b.req("a", 5.0, first=10.0, done=12.0, output=60, prompt=1000, cached=600, ideal=900)
    b.req("a", 65.0, first=70.0, done=72.0, output=60, prompt=1000, cached=700, ideal=900, turn=1)
    run = b.write("emu", **json.loads(json.dumps(MANIFEST)))
    pts = [SeedPoint(k, h, 0.98, 1.0, 1e4) for k, h in enumerate([0.8, 0.3])]
    write_band(run, Band(37, [7, 8], "engine", "sim-engine", [EngineBand("a", "a", pts)], [1.0]))
    return run


def _data(run: Path, warning: str | None = None) -> Any:
    data = analyze([load_run(run)], None, None, None, None, 60.0)
    if warning:
        data.warnings.append(warning)
    return data


def test_every_format_says_what_the_run_is(builder: Builder, tmp_path: Path) -> None:
    out = tmp_path / "rep"
    build_report([_run(builder)], out, "md,html,tex", figures=False)
    for name in ("report.md", "report.html", "report.tex"):
        text = " ".join((out / name).read_text().split())
        for words in ("emulated", "sample-weka.jsonl.gz", "16", "glm-5.3-flash", "37 sessions",
                      "1.00", "the demo", "seed 7", "Seed band", "1 of 2", "on the cliff"):  # fmt: skip
            assert words in text, (name, words)


def test_the_compiled_latex_shows_the_warnings_and_the_run(builder: Builder) -> None:
    data = _data(_run(builder), "a is saturated: its throughput is its ceiling")
    tex = render_tex(data, [], {"ttft_cdf": "figures/ttft_cdf.pdf"})
    shown = " ".join(LatexNodes2Text().latex_to_text(tex).split())
    assert "a is saturated: its throughput is its ceiling" in shown
    for words in ("emulated", "37 sessions", "seed 7", "Seed band", "on the cliff"):
        assert words in shown, words
    # the figure's caption carries the provenance too
    assert "ttft cdf: emulated" in shown


def test_figure_captions_carry_the_provenance(builder: Builder) -> None:
    data = _data(_run(builder))
    md = render_markdown(data, [], {"ttft_cdf": "figures/ttft_cdf.png"})
    assert "![ttft_cdf: emulated" in md and "Every figure: emulated" in md
    import plotly.graph_objects as go

    html = render_html(data, [], {"ttft_cdf": go.Figure()}, [])
    assert "<figcaption" in html and "ttft cdf: emulated" in html
