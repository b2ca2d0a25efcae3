"""`replay simulate`'s sweep in a child process, so SIGINT and SIGTERM stop it at once.

The simulator's hot loops are compiled (mypyc, `.mypyc/`): compiled code never returns to
the interpreter's loop, where Python runs signal handlers, so a simulation in the command's
own process ignored Ctrl-C until it finished (a spinning one: forever; only SIGTERM's
default action ended it, with no record). Here the sweep runs in a forked child (the trace
is shared, not copied) and the command only waits on it: on SIGINT or SIGTERM it kills the
child within a fraction of a second, writes an `interrupted` manifest for every run that did
not finish and `summary.csv` for those that did, and exits 130. The child dies with the
command even when the command is SIGKILLed (`replay.lifeline`).

Nothing the sweep starts outlives the command (issue 36): the child leads a process group of
its own, which its pool workers and a `--ray local` cluster's processes (Ray's dashboard and
runtime-env agents are the raylet's children, not bound to it) inherit; whenever the command
is done with the child (its result, an error, a signal, an exception of the command's own)
it kills that whole group, not only the child. A SIGKILLed command cannot: the pool workers
die with the child (`replay.sim.sweep`), and a small keeper process the command starts beside
the child (`_KEEPER`) kills the group once the command is gone (its stdin, the command's
pipe, reads end of file), which takes Ray's agents with it.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import Any

import replay
from replay.lifeline import pdeathsig_preexec
from replay.rundir import write_json_atomic
from replay.rundir_lock import utc_now
from replay.rundir_models import EngineEntry, Manifest, RunConfig, TraceInfo
from replay.runspec.sweep import manifest_spec
from replay.sim.runner import SimConfig, SimResult
from replay.sim.sweep import write_summary_csv

POLL_S = 0.2  # how often the command looks at its signals while the child works

Progress = Callable[[str, dict[str, Any]], None]  # run name, its summary row


class SweepInterrupted(Exception):
    """The sweep was stopped by a signal; the message says what was kept."""


class SweepFailed(Exception):
    """The child reported an error: `kind` is the exception class name, the message its text."""

    def __init__(self, kind: str, message: str, trace: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.trace = trace  # the child's traceback, for an error that is a bug


def _child(work: Callable[[Callable[[SimResult], None]], list[dict[str, Any]]], q: Any) -> None:
    with contextlib.suppress(OSError):  # the command does it too; whichever comes first
        os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command handles Ctrl-C for both
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    arm = pdeathsig_preexec(signal.SIGKILL)
    if arm is not None:
        arm()

    def done(res: SimResult) -> None:
        q.put(("done", res.config.run_name, res.summary))

    try:
        q.put(("rows", work(done)))
    except BaseException as e:  # every error goes back to the command, which prints it
        q.put(("error", type(e).__name__, str(e), traceback.format_exc()))


@contextmanager
def _signals_raise() -> Iterator[list[str]]:
    """SIGINT and SIGTERM set a flag (the list gets the signal's name) for the wait loop."""
    got: list[str] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        got.append(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield got
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run_in_child(
    work: Callable[[Callable[[SimResult], None]], list[dict[str, Any]]],
    configs: list[SimConfig],
    out_dir: Path,
    on_done: Progress,
    describe: dict[str, Any],
) -> list[dict[str, Any]]:
    """`work(on_result)` (the sweep) in a forked child; its rows. SweepInterrupted after a
    signal (the unfinished runs' manifests written `interrupted`), SweepFailed when the
    child raised."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    child = ctx.Process(target=_child, args=(work, q), name="replay-simulate", daemon=False)
    finished: dict[str, dict[str, Any]] = {}
    keeper: subprocess.Popen[bytes] | None = None
    with _signals_raise() as got:
        child.start()
        pid = child.pid
        if pid is not None:  # before any kill below can name the group
            with contextlib.suppress(OSError):
                os.setpgid(pid, pid)
            keeper = _keeper(pid)
        try:
            while True:
                if got:
                    _kill_group(child)
                    child.join(5)
                    raise SweepInterrupted(
                        _interrupted(configs, finished, out_dir, got[0], describe)
                    )
                try:
                    msg = q.get(timeout=POLL_S)
                except queue.Empty:
                    if not child.is_alive() and q.empty():
                        raise SweepFailed(
                            "died", f"the simulation process ended with code {child.exitcode}"
                        ) from None
                    continue
                if msg[0] == "done":
                    finished[msg[1]] = msg[2]
                    on_done(msg[1], msg[2])
                elif msg[0] == "rows":
                    child.join(10)
                    return list(msg[1])
                else:
                    child.join(10)
                    raise SweepFailed(msg[1], msg[2], msg[3])
        finally:
            _kill_group(child)
            child.join(5)
            _release(keeper)


# The keeper: kills the sweep's process group (argv[1]) when its stdin, a pipe the command
# holds, reads end of file: at the command's end, whatever ended it. Signals that reach the
# command's whole group (Ctrl-C, a hang-up) must not end it first. No site, no imports but
# the built-in modules: it starts in tens of milliseconds.
_KEEPER = """
import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
while os.read(0, 512):
    pass
try:
    os.killpg(int(sys.argv[1]), signal.SIGKILL)
except OSError:
    pass
"""


def _keeper(pgid: int) -> subprocess.Popen[bytes] | None:
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _KEEPER, str(pgid)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:  # no keeper: only a SIGKILLed command's Ray agents would be left
        return None


def _release(keeper: subprocess.Popen[bytes] | None) -> None:
    """The command is done with the group: the keeper kills what is left of it and ends."""
    if keeper is None:
        return
    with contextlib.suppress(OSError):
        if keeper.stdin is not None:
            keeper.stdin.close()
    try:
        keeper.wait(2)
    except subprocess.TimeoutExpired:
        keeper.kill()
        keeper.wait()


def _kill_group(child: Any) -> None:
    """SIGKILL the child's process group (the child, its pool workers, a local Ray cluster's
    processes) and the child itself in case its group was never made. A group whose members
    are all gone is no error; the group id is the child's pid, never the command's group."""
    pid = child.pid
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if child.is_alive():
        child.kill()


def _interrupted(
    configs: list[SimConfig],
    finished: dict[str, dict[str, Any]],
    out_dir: Path,
    signame: str,
    describe: dict[str, Any],
) -> str:
    """Write `interrupted` manifests for the unfinished runs and summary.csv for the rest;
    the line that says so."""
    out_dir.mkdir(parents=True, exist_ok=True)
    left = [c for c in configs if c.run_name not in finished]
    for cfg in left:
        _interrupted_manifest(cfg, out_dir / cfg.run_name, signame, describe)
    rows = [finished[c.run_name] for c in configs if c.run_name in finished]
    if rows:
        write_summary_csv(rows, out_dir / "summary.csv")
    kept = f"{len(rows)} finished (summary.csv)" if rows else "none finished"
    return (
        f"stopped by {signame}: of {len(configs)} runs {kept}; the {len(left)} unfinished "
        f"are marked interrupted in {out_dir} (run the sweep again to complete them)"
    )


def _interrupted_manifest(
    cfg: SimConfig, run_dir: Path, signame: str, describe: dict[str, Any]
) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    now = utc_now()
    trace = str(describe.get("trace", ""))
    manifest = Manifest(
        run_id=run_dir.name,
        command=str(describe.get("command", "replay simulate")),
        executor="simulator",
        harness_version=replay.__version__,
        config=RunConfig.model_validate(
            {
                **{k: v for k, v in asdict(cfg).items() if k in RunConfig.model_fields},
                "requested_capacity_blocks": cfg.capacity_blocks,
            }
        ),
        trace=TraceInfo(
            path=trace,
            sha256=describe.get("sha256"),
            token_scale=cfg.token_scale,
        ),
        seed=cfg.seed,
        spec=manifest_spec(cfg, trace),
        engines=[EngineEntry(name=cfg.policy, kind="sim", model=cfg.model)],
        start=now,
        end=now,
        status="interrupted",
        notes=[f"replay simulate was stopped by {signame} before this run finished; no records"],
    )
    write_json_atomic(
        run_dir / "manifest.json", manifest.model_dump(mode="json", exclude_none=True)
    )


__all__ = ["SweepFailed", "SweepInterrupted", "run_in_child"]
