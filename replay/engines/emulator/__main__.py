"""`python -m replay.engines.emulator [serve-sim flags]`: one emulator, without loading the
rest of the command line (a child process of `launch.py` starts faster this way)."""

from __future__ import annotations

import typer

from replay.commands import serve_sim

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
serve_sim.register(app)

if __name__ == "__main__":
    app()
