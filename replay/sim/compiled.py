"""The cache model's compiled build: which modules it holds, whether it is in use, and why not.

`scripts/build_sim.py` (run by `scripts/setup.sh`) compiles the cache's hot modules with
mypyc into `.mypyc/` at the repository root. The same Python source runs either way, and
`tests/unit/replay/sim/test_sim_golden.py` pins per-request results that both must give; the
build only makes a simulation faster (1.1–2.8× by policy; `scripts/bench_sim.py` prints which
ran).

The build is used only when it matches the sources exactly: its stamp holds a digest of
every compiled module's source and of the interpreter's extension suffix, so an edited
module, another Python or a missing build falls back to the interpreted modules — never to
stale compiled code. `REPLAY_SIM_INTERPRETED=1` forces the interpreted modules.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import sysconfig
from pathlib import Path

# The package whose modules are compiled, and those modules, compiled together (everything a
# simulated request runs through per block or per checkpoint; the rest is per request and
# stays interpreted).
PACKAGE = "replay.sim.cache"
MODULES: tuple[str, ...] = (
    "nodes",
    "keys",
    "requests",
    "store",
    "hybrid",
    "materialize",
    "eviction",
    "vllm_policy",
    "sglang_policy",
)

SIM_DIR = Path(__file__).resolve().parent
SOURCE_DIR = SIM_DIR / "cache"  # PACKAGE's sources
BUILD_DIR = SIM_DIR.parents[1] / ".mypyc"  # at the repository root, git-ignored
STAMP = BUILD_DIR / "STAMP"
ENV_OFF = "REPLAY_SIM_INTERPRETED"
EXT_SUFFIX: str = sysconfig.get_config_var("EXT_SUFFIX") or ".so"

# How this process runs the cache model (set when `replay.sim.cache` is imported).
MODE = "interpreted (replay.sim.cache not imported yet)"


def source_digest() -> str:
    """What a build must have been made from to be used: the compiled modules' sources and
    this interpreter's extension suffix."""
    h = hashlib.sha256(EXT_SUFFIX.encode())
    for name in MODULES:
        h.update(name.encode() + b"\0")
        h.update((SOURCE_DIR / f"{name}.py").read_bytes())
    return h.hexdigest()


def use_build(package_path: list[str]) -> str:
    """Put the compiled modules ahead of the sources on `PACKAGE`'s search path when the
    build matches them; returns (and records in `MODE`) what runs and why."""
    global MODE
    MODE = _use_build(package_path)
    return MODE


def _use_build(package_path: list[str]) -> str:
    if os.environ.get(ENV_OFF):
        return f"interpreted ({ENV_OFF} is set)"
    if not STAMP.is_file():
        return "interpreted (no compiled build: run scripts/build_sim.py)"
    if STAMP.read_text().strip() != source_digest():
        return "interpreted (the compiled build is stale: run scripts/build_sim.py)"
    libs = sorted(BUILD_DIR.glob(f"*__mypyc{EXT_SUFFIX}"))
    mods = BUILD_DIR.joinpath(*PACKAGE.split("."))
    if len(libs) != 1 or not all((mods / f"{m}{EXT_SUFFIX}").is_file() for m in MODULES):
        return "interpreted (the compiled build is incomplete: run scripts/build_sim.py)"
    # The modules' shared library is imported by its top-level name; load it from the build
    # directory without putting that directory on sys.path.
    lib = libs[0]
    spec = importlib.util.spec_from_file_location(lib.name.removesuffix(EXT_SUFFIX), lib)
    if spec is None or spec.loader is None:
        return f"interpreted (cannot load {lib.name})"
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    package_path.insert(0, str(mods))
    return f"compiled (mypyc, {BUILD_DIR.name}/)"


def is_compiled(module_file: str | None) -> bool:
    """Whether a module was loaded from the compiled build."""
    return bool(module_file) and str(module_file).endswith(EXT_SUFFIX)
