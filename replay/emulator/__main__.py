"""`python -m replay.emulator [serve-sim flags]`: one emulator, without loading the
rest of the command line (a child process of `launch.py` starts faster this way). A child
gets its config whole instead (`EmulatorConfig.child_args`)."""

from __future__ import annotations

import sys

import typer

from replay.emulator.cli import register, serve_child
from replay.lifeline import die_with_parent

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
register(app)

if __name__ == "__main__":
    die_with_parent()  # started by the harness: end with it, even if it is SIGKILLed
    from replay.config_paths import config_dir_problem

    if (problem := config_dir_problem()) is not None:  # as `replay` refuses it
        print(f"error: {problem}", file=sys.stderr, flush=True)
        sys.exit(2)
    try:
        served = serve_child(sys.argv[1:])  # a config handed over whole, or flags
    except typer.Exit as e:  # its one-line error is printed; exit as serve-sim would
        sys.exit(e.exit_code)
    if not served:
        app()
