"""`python -m replay.emulator [serve-sim flags]`: one emulator, without loading the
rest of the command line (a child process of `launch.py` starts faster this way)."""

from __future__ import annotations

import typer

from replay.emulator.cli import register
from replay.lifeline import die_with_parent

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
register(app)

if __name__ == "__main__":
    die_with_parent()  # started by the harness: end with it, even if it is SIGKILLed
    app()
