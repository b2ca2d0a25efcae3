"""Start the dashboard's Streamlit server with its heavy libraries already imported.

Streamlit imports an app's modules only when the first browser session runs the script, so
the first visitor would also wait for pandas, pyarrow's parquet reader, pydantic, plotly and
our analysis and pricing packages to import (about 0.6 s of a ~3 s first page on a 2-core
machine, measured with scripts/bench_dashboard.py). Importing them here, before the server
answers its health check, moves that wait to start-up. The dashboard's own modules are left
to the script: they create Streamlit caches, which belong to the running server.

    python -m dashboards.serve run dashboards/app.py [streamlit options] -- RUNS_DIR
"""

from __future__ import annotations

import importlib
import sys

PRELOAD = (
    "pandas",
    "pyarrow.parquet",
    "numpy",
    "orjson",
    "yaml",
    "pydantic",
    "plotly.graph_objects",
    "analysis.runs",
    "analysis.metrics",
    "analysis.sweeps",
    "pricing",
    "pricing.whatif",
)


def preload(modules: tuple[str, ...] = PRELOAD) -> None:
    for name in modules:
        importlib.import_module(name)


def main(argv: list[str]) -> int:
    """`streamlit ARGV...` after `preload()`; returns streamlit's exit status."""
    preload()
    from streamlit.web import cli

    sys.argv = ["streamlit", *argv]
    try:
        cli.main()
    except SystemExit as e:  # click ends every command with SystemExit
        return int(e.code or 0) if not isinstance(e.code, str) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
