"""Every page and figure says which window it counts: the measured window ("window 15–45 min")
or the whole run, said as such."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboards.figures import cumulative_output_figure

# What a figure's title may say about what it counts.
SAYS = ("window 15–45 min", "whole run", "no run's window")


def _page(module: str, root: str) -> None:
    import importlib
    from pathlib import Path

    importlib.import_module(f"dashboards.views.{module}").render(Path(root))


@pytest.mark.usefixtures("fresh_cache")
@pytest.mark.parametrize("page", ["replay", "compare", "pricing_whatif", "sessions", "live"])
def test_every_figure_says_what_it_counts(runs_root: Path, page: str) -> None:
    at = AppTest.from_function(_page, args=(page, str(runs_root)), default_timeout=60)
    at.query_params["run"] = "small"
    at.run()
    if page == "replay":
        at.toggle(key="replay_chart").set_value(True).run()
    if page == "live":
        at.selectbox(key="live_run").set_value("small").run()
    assert not at.exception and not at.error
    charts = at.get("plotly_chart")
    assert charts
    for chart in charts:
        title = json.loads(chart.proto.spec)["layout"]["title"]["text"]
        assert any(s in title for s in SAYS), title


@pytest.mark.usefixtures("fresh_cache")
def test_replay_verdicts_say_their_window(runs_root: Path) -> None:
    at = AppTest.from_function(_page, args=("replay", str(runs_root)), default_timeout=60).run()
    assert any(e.label.endswith("(window 15–45 min)") for e in at.expander)


def test_the_output_chart_shades_the_measured_window() -> None:
    req = pd.DataFrame({"engine": ["a"], "done_s": [100.0], "output_tokens": [5]})
    fig = cumulative_output_figure(req, end_s=2700.0, window=(900.0, 2700.0))
    shade = next(s for s in fig.layout.shapes if s.type == "rect")
    assert (shade.x0, shade.x1) == (15.0, 45.0)  # minutes
    assert "whole run; shaded: the measured window 15–45 min" in fig.layout.title.text
