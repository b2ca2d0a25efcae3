"""Fixtures for the dashboard tests: small run directories written with the same synthetic
writer the benchmark uses (`scripts/bench_dashboard.py`, loaded with runpy since scripts are
not a package), and broken ones."""

from __future__ import annotations

import runpy
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
APP = REPO / "dashboards" / "app.py"


@pytest.fixture(scope="session")
def synth() -> dict[str, Any]:
    """The benchmark script's globals: `write_synthetic_run`, `synthetic_rows`, `ENGINES`."""
    return runpy.run_path(str(REPO / "scripts" / "bench_dashboard.py"))


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory, synth: dict[str, Any]) -> Path:
    """A runs folder with two completed runs (different session counts) and nothing else.

    Session-scoped and read-only: tests that need broken runs make their own folder."""
    root = tmp_path_factory.mktemp("runs")
    synth["write_synthetic_run"](root / "small", n_requests=1_500, seed=1)
    synth["write_synthetic_run"](root / "larger", n_requests=3_000, seed=2)
    return root


@pytest.fixture
def app_argv(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], None]:
    """Point the app at a runs folder the way `replay dashboard` does (script argument)."""

    def point(root: Path) -> None:
        monkeypatch.setattr(sys, "argv", [str(APP), str(root)])

    return point


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    """Cached loads are keyed on path and file stamps; clear them so tests stay independent."""
    import streamlit as st

    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()
