"""The simulator's compiled build: which modules it holds, whether it is in use, and why not.

`scripts/build_sim.py` (run by `scripts/setup.sh`) compiles the hot modules of the cache
model, of the engine model and its virtual-clock executor with mypyc into `.mypyc/` at the
repository root. The same Python source runs either way, and
`tests/unit/replay/sim/test_sim_golden.py` pins per-request results that both must give; the
build only makes a simulation faster (1.1–2.8× by policy for the cache model; the engine
model and its executor took a fleet of 8 replicas × 64 sessions from 16.7 to 10.6 s of CPU,
issue 36 point 8; `scripts/bench_sim.py` prints which ran).

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
from types import ModuleType

# The package whose modules are compiled, and those modules (relative to it), compiled
# together: everything a simulated request runs through per block or per checkpoint (the
# cache model), and per engine step (the engine model's scheduler and clock, the executor
# that steps it); the rest is per request and stays interpreted.
PACKAGE = "replay.sim"
MODULES: tuple[str, ...] = (
    "cache.nodes",
    "cache.cost",
    "cache.keys",
    "cache.requests",
    "cache.store",
    "cache.hybrid",
    "cache.materialize",
    "cache.eviction",
    "cache.vllm_policy",
    "cache.sglang_policy",
    "engine.sequence",
    "engine.clock",
    "engine.step",
    "engine.core",
    "events",
    "engine_timing",
)

SIM_DIR = Path(__file__).resolve().parent
SOURCE_DIR = SIM_DIR  # PACKAGE's sources
BUILD_DIR = SIM_DIR.parents[1] / ".mypyc"  # at the repository root, git-ignored
STAMP = BUILD_DIR / "STAMP"
ENV_OFF = "REPLAY_SIM_INTERPRETED"


def interpreted_by_env() -> bool:
    """Whether `ENV_OFF` asks for the interpreted modules: set, and not to an off value
    (`0`, `false`, `no`, `off`; `REPLAY_SIM_INTERPRETED=0` used to switch it on)."""
    return os.environ.get(ENV_OFF, "").strip().lower() not in ("", "0", "false", "no", "off")


EXT_SUFFIX: str = sysconfig.get_config_var("EXT_SUFFIX") or ".so"

# How this process runs the simulator's hot modules (set when `replay.sim` is imported).
MODE = "interpreted (replay.sim not imported yet)"


def source_digest() -> str:
    """What a build must have been made from to be used: the compiled modules' sources and
    this interpreter's extension suffix."""
    h = hashlib.sha256(EXT_SUFFIX.encode())
    for name in MODULES:
        h.update(name.encode() + b"\0")
        h.update(source(name).read_bytes())
    return h.hexdigest()


def source(name: str) -> Path:
    """The source file of compiled module `name` (one of `MODULES`)."""
    return SOURCE_DIR.joinpath(*name.split(".")).with_suffix(".py")


def use_build(package_path: list[str], sub: str = "cache") -> str:
    """Put the compiled modules of `PACKAGE`'s subpackage `sub` ("" for `PACKAGE` itself)
    ahead of the sources on that package's search path (`package_path`, its `__path__`)
    when the build matches them; returns (and records in `MODE`) what runs and why. Each
    package calls it as it is imported, before any of its modules."""
    global MODE
    MODE = _use_build(package_path, sub)
    return MODE


def _use_build(package_path: list[str], sub: str = "cache") -> str:
    if interpreted_by_env():
        return f"interpreted ({ENV_OFF} is set)"
    if not STAMP.is_file():
        return "interpreted (no compiled build: run scripts/build_sim.py)"
    if STAMP.read_text().strip() != source_digest():
        return "interpreted (the compiled build is stale: run scripts/build_sim.py)"
    libs = sorted(BUILD_DIR.glob(f"*__mypyc{EXT_SUFFIX}"))
    root = BUILD_DIR.joinpath(*PACKAGE.split("."))
    if len(libs) != 1 or not all(built(root, m).is_file() for m in MODULES):
        return "interpreted (the compiled build is incomplete: run scripts/build_sim.py)"
    # The modules' shared library is imported by its top-level name; load it from the build
    # directory without putting that directory on sys.path.
    lib = libs[0]
    name = lib.name.removesuffix(EXT_SUFFIX)
    if name not in sys.modules:  # once, for every package that uses it
        spec = importlib.util.spec_from_file_location(name, lib)
        if spec is None or spec.loader is None:
            return f"interpreted (cannot load {lib.name})"
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    package_path.insert(0, str(root.joinpath(*sub.split(".")) if sub else root))
    return f"compiled (mypyc, {BUILD_DIR.name}/)"


def built(root: Path, name: str) -> Path:
    """Where the build holds compiled module `name` (one of `MODULES`) under `root`."""
    return root.joinpath(*name.split(".")).with_suffix(EXT_SUFFIX)


def is_compiled(module_file: str | None) -> bool:
    """Whether a module was loaded from the compiled build."""
    return bool(module_file) and str(module_file).endswith(EXT_SUFFIX)


def interpreted(name: str) -> ModuleType:
    """Compiled module `name` (one of `MODULES`) loaded from its source whether or not the
    build is in use, under a private name beside the package's own module. For the few
    callers that hand the model a stand-in a compiled module's types refuse: the scheduler
    oracle drives `engine_timing.EngineExecutor` with vLLM's own scheduler in place of
    `EngineCore` (replay/sim/native/sched_oracle.py). Its imports resolve as usual."""
    if name not in MODULES:
        raise ValueError(f"{name!r} is not one of the compiled modules {MODULES}")
    private = f"{PACKAGE}._interpreted_{name.replace('.', '_')}"
    if private in sys.modules:
        return sys.modules[private]
    spec = importlib.util.spec_from_file_location(private, source(name))
    assert spec is not None and spec.loader is not None  # a .py file in this package
    module = importlib.util.module_from_spec(spec)
    sys.modules[private] = module
    spec.loader.exec_module(module)
    return module
