"""Benchmark: how long `replay --help` and every command's and sub-command's `--help` take
(target: under 0.5 s each, issue 32), beside a bare `python -c pass` on the same interpreter.

Each help is run as its own process, as a user runs it, several times; the median wall time
counts (the CPU time beside it, user + system, tells a slow help from a busy machine). The
commands are read from the typer app itself (`replay.cli.app`), so a new command or
sub-command is timed without editing this script. Runs the `replay` script beside this
interpreter (the console script a user runs), else `python -m replay`.

    .venv/bin/python scripts/bench_help.py [--repeat 5] [--target 0.5] [--check]

`--check`: exit 1 when any help takes longer than the target. What a slow help imports:
`python -X importtime -c "import replay.cli"`.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

TARGET_S = 0.5  # issue 32: every --help within half a second


def command_paths(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command path of the click tree under `cmd`, the root's () first, each group
    before its sub-commands, in the order the help lists them."""
    yield path
    for name, sub in getattr(cmd, "commands", {}).items():
        if not getattr(sub, "hidden", False):
            yield from command_paths(sub, (*path, name))


def entry() -> list[str]:
    """How to start `replay` on this interpreter: its console script when it is installed
    beside it, else the package as a module."""
    script = Path(sys.executable).parent / "replay"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "replay"]


def _cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed_s(argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of `argv`, start to exit; a failed run stops the
    benchmark."""
    cpu0, t0 = _cpu_s(), time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    took, cpu = time.perf_counter() - t0, _cpu_s() - cpu0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr.decode()}")
    return took, cpu


def median_s(argv: list[str], repeat: int) -> tuple[float, float]:
    """The median wall and CPU seconds of `repeat` runs of `argv`."""
    timed_s(argv)  # one untimed run: the disk cache and the .pyc files, not the import
    runs = [timed_s(argv) for _ in range(repeat)]
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per command (median)")
    ap.add_argument("--target", type=float, default=TARGET_S, help="seconds (0.5)")
    ap.add_argument("--check", action="store_true", help="exit 1 if any help is over target")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat: at least 1")

    from replay.cli import app

    paths = list(command_paths(typer.main.get_command(app)))
    base, base_cpu = median_s([sys.executable, "-c", "pass"], args.repeat)
    replay = entry()
    print(f"{' '.join(replay)}: {len(paths)} helps, median of {args.repeat} runs each")
    print(f"python -c pass: {base:.3f} s wall, {base_cpu:.3f} s CPU (the interpreter's start)")
    print(f"{'command':<36} {'wall s':>7} {'× pass':>7} {'CPU s':>6}  target {args.target:g} s")
    over = []
    for path in paths:
        took, cpu = median_s([*replay, *path, "--help"], args.repeat)
        name = " ".join(("replay", *path, "--help"))
        mark = "OVER" if took > args.target else "ok"
        if took > args.target:
            over.append(name)
        print(f"{name:<36} {took:>7.3f} {took / base:>7.1f} {cpu:>6.3f}  {mark}", flush=True)
    if over:
        print(f"{len(over)} of {len(paths)} over {args.target:g} s: {', '.join(over)}")
    else:
        print(f"all {len(paths)} within {args.target:g} s")
    return 1 if over and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
