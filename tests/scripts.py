"""A script of `scripts/` or an experiment of `experiments/` loaded as a module, for the tests
of its functions and messages."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
EXPERIMENTS = ROOT / "experiments"


def _load(path: Path, register: bool) -> ModuleType:
    name = path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def load_script(name: str, register: bool = False) -> ModuleType:
    """`scripts/<name>.py` as a fresh module; `register`: also as `sys.modules[name]` (a
    script whose dataclasses or pickles look their module up by name)."""
    return _load(SCRIPTS / f"{name}.py", register)


def load_experiment(name: str, register: bool = False) -> ModuleType:
    """`experiments/<name>.py` as a fresh module, as `load_script`."""
    return _load(EXPERIMENTS / f"{name}.py", register)
