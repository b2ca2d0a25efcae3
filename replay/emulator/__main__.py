"""`python -m replay.emulator [serve-sim flags]`: one emulator, without loading the
rest of the command line (a child process of `launch.py` starts faster this way). A child
gets its config whole instead (`EmulatorConfig.child_args`)."""

from __future__ import annotations

import sys

import typer

from replay.emulator.cli import register, serve_config
from replay.emulator.config import from_child_args
from replay.lifeline import die_with_parent

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
register(app)

if __name__ == "__main__":
    die_with_parent()  # started by the harness: end with it, even if it is SIGKILLed
    cfg = from_child_args(sys.argv[1:])
    if cfg is not None:
        serve_config(cfg)
    else:
        app()
