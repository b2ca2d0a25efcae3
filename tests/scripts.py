"""A script of `scripts/` loaded as a module, for the tests of its functions and messages."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str, register: bool = False) -> ModuleType:
    """`scripts/<name>.py` as a fresh module; `register`: also as `sys.modules[name]` (a
    script whose dataclasses or pickles look their module up by name)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
