"""Kill `replay run --workers 4` with SIGKILL at random moments, `--resume` it each time, and
count the turns recorded twice (issue 36, point 2).

Each trial is one run directory: the run is started, SIGKILLed after a random delay, resumed,
killed again, ... `--kills-per-run` times, then resumed to its end. A duplicate is a turn
recorded `ok` more than once within one assignment (a session slot's n-th trajectory: its rows
from its first request, the priming one or turn 0, to the next assignment's), an assignment
the resumed run replayed again (each slot's assignments, in the order recorded, must be the
workload's ordinals 0, 1, 2, ... as `replay.workload.Workload.assignment` draws them: a slot
may replay the same trajectory again as a new ordinal, which is no duplicate), or a
`(worker, seq)` line merged twice. Prints one line per kill and the totals; exit 1 when any
duplicate was found.

    python scripts/probe_resume_kills.py --kills 50            # the issue's figure
    python scripts/probe_resume_kills.py --kills 3 --seed 7    # what the CI test runs
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from replay.rundir import read_journal  # noqa: E402

TURN = ("agent", "turn", "priming")
# The workload's assignment (slot, ordinal) -> (trajectory id, first request's index).
Drawn = Callable[[int, int], tuple[str, int]]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", COLUMNS="200")


def _descendants(pid: int) -> set[int]:
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            with contextlib.suppress(OSError):
                kids = {int(c) for c in (task / "children").read_text().split()}
                todo += list(kids - out)
                out |= kids
    return out


def _alive(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _starts(r: dict[str, Any]) -> bool:
    """A row that opens an assignment (what `orchestrate.resume_point` counts)."""
    first = r.get("priming") or r.get("turn") == 0
    return bool(r.get("agent") == "main" and r.get("attempt") == 0 and first)


def repeated_turns(rows: list[dict[str, Any]], drawn: Drawn) -> int:
    """Turns recorded more than once: within an assignment, a turn `ok` twice; and every
    `ok` turn of an assignment that is not the slot's next ordinal (`drawn`): one that
    repeats an ordinal already recorded, or one the workload never drew next."""
    by_slot: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        by_slot.setdefault((str(r["engine"]), int(r["session"])), []).append(r)
    found = 0
    for (_, slot), mine in by_slot.items():
        mine.sort(key=lambda r: (r.get("sent_s") or r.get("scheduled_s") or 0.0, not _starts(r)))
        parts: list[list[dict[str, Any]]] = []
        for r in mine:
            if _starts(r) or not parts:
                parts.append([])
            parts[-1].append(r)
        ordinal = 0
        for part in parts:
            turns = Counter(tuple(r.get(k) for k in TURN) for r in part if r["status"] == "ok")
            found += sum(n - 1 for n in turns.values() if n > 1)
            head = part[0]
            if not _starts(head):
                continue  # the run's first rows of a slot whose opening row is lost
            if (head["trajectory"], int(head["turn"])) == drawn(slot, ordinal):
                ordinal += 1
            else:
                found += sum(turns.values())  # a replay of an earlier ordinal, or no draw
    return found


def drawn_by(run: Path) -> Drawn:
    """The run's workload as its manifest's spec draws it (what `--resume` rebuilds)."""
    from replay.rundir import read_manifest
    from replay.runspec.model import RunSpec
    from replay.traces import load_trace, sample_path
    from replay.workload import Workload

    spec = RunSpec.model_validate(read_manifest(run).spec)
    trace = load_trace(spec.workload.trace or sample_path())
    workload = Workload(trace, spec.workload.config(clamp_warmup=True))

    def drawn(slot: int, ordinal: int) -> tuple[str, int]:
        a = workload.assignment(slot, ordinal)
        return a.trajectory.id, a.first_index

    return drawn


def duplicates(run: Path) -> tuple[int, int]:
    """(turns recorded `ok` more than once, (worker, seq) lines merged more than once)."""
    rows = read_journal(run)
    lines = Counter((r["worker"], r["seq"]) for r in rows if "worker" in r and "seq" in r)
    twice = sum(n - 1 for n in lines.values() if n > 1)
    return repeated_turns(rows, drawn_by(run)), twice


def _segment(args: list[str], log: Path, kill_after: float | None, run: Path) -> bool:
    """Run one segment; SIGKILL it `kill_after` s after the run directory has a manifest
    (before it, there is nothing to resume). True when it was killed mid-run."""
    with log.open("ab") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "replay", "run", *args, "--no-panel"],
            stdout=fh, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT,
        )  # fmt: skip
    try:
        if kill_after is None:
            proc.wait(600)
            return False
        deadline = time.monotonic() + 120
        while not (run / "manifest.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            proc.wait(kill_after)
            if proc.returncode not in (0, 1):
                raise SystemExit(f"replay run {' '.join(args)} exited {proc.returncode}: {log}")
            return False  # ended before the kill
        except subprocess.TimeoutExpired:
            pass
        kids = _descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 30  # workers and emulators die with the run
        while time.monotonic() < deadline and any(_alive(p) for p in kids):
            time.sleep(0.1)
        return True
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def trial(
    run: Path, rng: random.Random, kills: int, duration_min: float, span_s: float
) -> tuple[int, int]:
    """One run directory killed up to `kills` times; prints each kill; returns the
    duplicates and the kills made (a segment that ended before its kill is none)."""
    log = run.parent / f"{run.name}.log"
    first = ["--engines", "vllm", "--sessions", "8", "--duration-min", f"{duration_min:g}",
             "--window", f"0-{duration_min:g}", "--workers", "4", "--out", str(run)]  # fmt: skip
    found = 0
    for k in range(kills):
        at = rng.uniform(0.3, span_s)
        args = first if k == 0 else ["--resume", str(run)]
        killed = _segment(args, log, at, run)
        turns, lines = duplicates(run) if (run / "requests.jsonl").exists() else (0, 0)
        found = turns + lines
        print(
            f"{run.name} kill {k + 1}: at {at:5.1f} s{'' if killed else ' (ended first)'}, "
            f"duplicated turns {turns}, lines {lines}",
            flush=True,
        )
        if not killed:
            return found, k
    _segment(["--resume", str(run)], log, None, run)
    turns, lines = duplicates(run)
    print(f"{run.name} resumed to its end: duplicated turns {turns}, lines {lines}", flush=True)
    return turns + lines, kills


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=50, help="kills in all (50)")
    ap.add_argument("--kills-per-run", type=int, default=5, help="kills per run directory (5)")
    ap.add_argument("--duration-min", type=float, default=10.0, help="trace minutes a run (10)")
    ap.add_argument("--span-s", type=float, default=8.0, help="kill within this many s (8)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", type=Path, help="where the run directories go (a temporary one)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    base = a.dir or Path(tempfile.mkdtemp(prefix="resume-kills-"))
    base.mkdir(parents=True, exist_ok=True)
    done, total, n = 0, 0, 0
    while done < a.kills:
        found, made = trial(
            base / f"run{n}", rng, min(a.kills_per_run, a.kills - done), a.duration_min, a.span_s
        )
        total, done, n = total + found, done + made, n + 1
    print(f"kills: {done}, run directories: {n}, duplicates: {total} ({base})", flush=True)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
