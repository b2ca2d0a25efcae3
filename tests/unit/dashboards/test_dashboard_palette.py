"""One colour per engine everywhere: the dashboard's figures and the report's read one palette
(`analysis.palette`), so an engine has the same colour on every page and in the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from analysis.palette import KNOWN, OTHERS, engine_color, engine_colors
from analysis.report.content import analyze
from analysis.report.figures import all_figures
from analysis.runs import load_run
from dashboards.figures import (
    cumulative_output_figure,
    engine_bars_figure,
    sweep_figure,
    throughput_over_time_figure,
)

ENGINES = ("flashstate", "vllm", "sglang")


def test_known_engines_have_fixed_distinct_colours() -> None:
    assert engine_color("flashstate") == "#2a9d8f"
    assert engine_color("vllm") == "#e76f51"
    assert engine_color("sglang") == "#264653"
    assert len(set(KNOWN.values())) == len(KNOWN)
    assert not set(OTHERS) & set(KNOWN.values())
    assert engine_color("FlashState") == engine_color("flashstate")


def test_a_colour_does_not_depend_on_the_other_engines_or_their_order() -> None:
    alone = engine_colors(["vllm"])
    assert engine_colors(["sglang", "my-engine", "vllm"])["vllm"] == alone["vllm"]
    assert engine_colors(["vllm", "sglang"]) == engine_colors(["sglang", "vllm"])


def test_other_names_get_a_deterministic_colour() -> None:
    # A hash of the name, not of the process (Python's hash() is salted per process).
    assert engine_color("vllm-a100-canary") == engine_color("vllm-a100-canary")
    assert engine_color("vllm-a100-canary") in OTHERS
    assert engine_color("vllm-a100-canary") == "#2ca02c"  # the same in every run of the suite
    assert len({engine_color(f"engine-{i}") for i in range(40)}) > 1


def _colours(fig: Any) -> dict[str, set[str]]:
    """{engine name in the trace's name: the colours it is drawn in} over a figure's traces."""
    found: dict[str, set[str]] = {}
    for trace in fig.data:
        marker = getattr(trace, "marker", None)
        bar_colours = getattr(marker, "color", None) if marker is not None else None
        if trace.type == "bar" and isinstance(bar_colours, tuple | list):
            for x, c in zip(trace.x, bar_colours, strict=True):
                found.setdefault(str(x).split(" ·")[0], set()).add(str(c))
            continue
        line = getattr(trace, "line", None)
        colour = getattr(line, "color", None) if line is not None else None
        if colour and trace.name:
            found.setdefault(str(trace.name).split(" ·")[0], set()).add(str(colour))
    return found


def test_the_dashboard_and_the_report_draw_an_engine_in_one_colour(
    tmp_path: Path, synth: dict[str, Any]
) -> None:
    run_dir = synth["write_synthetic_run"](tmp_path / "run", n_requests=600, seed=4)
    run = load_run(run_dir)
    report = all_figures(analyze([run]))
    seen: dict[str, set[str]] = {}
    for fig in report.values():
        for engine, colours in _colours(fig).items():
            seen.setdefault(engine, set()).update(colours)
    for engine in ENGINES:
        assert seen[engine] == {engine_color(engine)}, engine  # every report figure alike
    # The dashboard's figures, with the engines in another order than the run's.
    req = run.requests
    sweep = pd.DataFrame(
        {"engine": ["sglang", "vllm", "flashstate"], "sessions": [4, 4, 4], "hit_rate": [0.1] * 3}
    )
    dash = [
        cumulative_output_figure(req, end_s=2700.0),
        throughput_over_time_figure(req),
        sweep_figure(sweep, "hit_rate", "Hit rate (%)", percent=True),
        engine_bars_figure({"sglang": 1.0, "flashstate": 2.0, "vllm": 3.0}, "Profit", "$"),
    ]
    for fig in dash:
        colours = _colours(fig)
        for engine in ENGINES:
            assert colours[engine] == {engine_color(engine)}, (engine, fig.layout.title.text)
