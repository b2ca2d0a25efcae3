"""The dashboard's entry file: `streamlit run dashboards/app.py -- RUNS_DIR`.

Thin on purpose: it fixes the runs folder, names the pages and hands over to the page the
address asks for. Each page is `dashboards.views.<page>.render(root)`.
"""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

import streamlit as st

from dashboards.paths import runs_root_from
from dashboards.views import compare, live, pricing_whatif, replay, sessions

PAGES = (
    (replay.render, "Replay", "replay", ":material/play_circle:"),
    (compare.render, "Compare runs and sweeps", "compare", ":material/stacked_line_chart:"),
    (pricing_whatif.render, "Pricing what-if", "pricing", ":material/payments:"),
    (sessions.render, "Sessions", "sessions", ":material/forum:"),
    (live.render, "Live", "live", ":material/sensors:"),
)


def _shown(root: Path) -> str:
    """The folder as the user typed it, relative to where they started, when inside it."""
    try:
        return root.relative_to(Path.cwd()).as_posix() or "."
    except ValueError:
        return str(root)


def main() -> None:
    st.set_page_config(page_title="Replay dashboard", page_icon=":material/speed:", layout="wide")
    root = runs_root_from(sys.argv[1:], os.environ)
    st.sidebar.caption(f"Runs folder: `{_shown(root)}`")
    pages = [
        st.Page(partial(render, root), title=title, url_path=path, icon=icon, default=i == 0)
        for i, (render, title, path, icon) in enumerate(PAGES)
    ]
    st.navigation(pages).run()


main()
