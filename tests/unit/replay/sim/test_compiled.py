"""The cache model's compiled build (`replay.sim.compiled`, `scripts/build_sim.py`): used only
when it matches the sources, never stale, and giving exactly the interpreted results."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import replay.sim
import replay.sim.cache.hybrid
from replay.sim import compiled
from tests.required import SIM_BUILD, missing
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture
def build_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`compiled` pointed at an empty build directory of its own."""
    monkeypatch.setattr(compiled, "BUILD_DIR", tmp_path)
    monkeypatch.setattr(compiled, "STAMP", tmp_path / "STAMP")
    monkeypatch.delenv(compiled.ENV_OFF, raising=False)
    return tmp_path


def test_without_a_build_the_modules_run_interpreted_and_say_how_to_build(build_dir: Path):
    path: list[str] = []
    assert compiled._use_build(path) == "interpreted (no compiled build: run scripts/build_sim.py)"
    assert path == []


def test_a_build_of_other_sources_is_never_used(build_dir: Path):
    (build_dir / "STAMP").write_text("0" * 64 + "\n")
    path: list[str] = []
    assert "stale" in compiled._use_build(path)
    assert path == []


def test_a_build_missing_a_module_is_never_used(build_dir: Path):
    (build_dir / "STAMP").write_text(compiled.source_digest() + "\n")
    path: list[str] = []
    assert "incomplete" in compiled._use_build(path)
    assert path == []


def test_the_environment_switch_forces_the_interpreted_modules(
    build_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(compiled.ENV_OFF, "1")
    assert compiled._use_build([]) == f"interpreted ({compiled.ENV_OFF} is set)"


@pytest.mark.parametrize("value", ["0", "false", "No", " off ", ""])
def test_an_off_value_of_the_environment_switch_leaves_the_build_in_use(
    value: str, monkeypatch: pytest.MonkeyPatch
):
    """`REPLAY_SIM_INTERPRETED=0` used to force the interpreted modules (any value did)."""
    monkeypatch.setenv(compiled.ENV_OFF, value)
    assert not compiled.interpreted_by_env()


def test_the_digest_covers_every_compiled_module_and_the_interpreter(
    monkeypatch: pytest.MonkeyPatch,
):
    base = compiled.source_digest()
    monkeypatch.setattr(compiled, "EXT_SUFFIX", ".cpython-399-other.so")
    assert compiled.source_digest() != base
    monkeypatch.undo()
    monkeypatch.setattr(compiled, "MODULES", compiled.MODULES[:-1])
    assert compiled.source_digest() != base


def test_a_fresh_build_is_the_one_in_use():
    """Where setup built it (the test setup must), the cache runs compiled; else interpreted,
    and the mode says why."""
    if compiled.interpreted_by_env():
        pytest.skip(f"{compiled.ENV_OFF} is set")
    fresh = compiled.STAMP.is_file() and compiled.STAMP.read_text().strip() == (
        compiled.source_digest()
    )
    if not fresh:
        missing(f"no up-to-date compiled build ({compiled.MODE})", SIM_BUILD)
    assert compiled.MODE.startswith("compiled") == fresh, compiled.MODE
    for name in compiled.MODULES:
        module = importlib.import_module(f"{compiled.PACKAGE}.{name}")
        assert compiled.is_compiled(module.__file__) == fresh, module.__file__
    assert compiled.is_compiled(replay.sim.cache.hybrid.__file__) == fresh


def test_the_interpreted_modules_give_the_golden_results_too():
    """The per-request golden results hold in the other mode as well (a subprocess, since a
    process loads the modules once)."""
    if not compiled.MODE.startswith("compiled"):
        pytest.skip(f"only the interpreted modules are here ({compiled.MODE})")
    env = {**os.environ, compiled.ENV_OFF: "1"}
    golden = ROOT / "tests" / "unit" / "replay" / "sim" / "test_sim_golden.py"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(golden)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout


def test_build_sim_names_what_is_missing(monkeypatch: pytest.MonkeyPatch, capsys, tmp_path: Path):
    build_sim = load_script("build_sim")
    monkeypatch.setattr(compiled, "BUILD_DIR", tmp_path / ".mypyc")
    monkeypatch.setattr(compiled, "STAMP", tmp_path / ".mypyc" / "STAMP")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mypyc" else real(name, *a)
    )
    assert build_sim.build(force=True) == 2
    err = capsys.readouterr().err
    assert "build_sim: mypyc is not installed" in err and "pip install -e '.[dev]'" in err
    assert not (tmp_path / ".mypyc").exists()


def test_a_compiled_module_loads_from_its_source_on_request():
    import replay.sim.engine_timing as in_use

    source = compiled.interpreted("engine_timing")
    assert source.__file__ == str(compiled.source("engine_timing"))
    assert not compiled.is_compiled(source.__file__)
    assert source is compiled.interpreted("engine_timing")  # loaded once
    assert source.EngineExecutor is not in_use.EngineExecutor

    class StandIn:  # what the scheduler oracle hands it in place of an EngineCore
        every_token = True

    core = StandIn()
    executor = source.EngineExecutor(None, core, lambda *_: None)
    assert executor.core is core and core.every_token is False
    with pytest.raises(ValueError, match="'driver' is not one of the compiled modules"):
        compiled.interpreted("driver")
