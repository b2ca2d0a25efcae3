"""`replay traces ...`: not built yet."""

from __future__ import annotations

import typer

from replay.commands.common import not_built

app = typer.Typer(help="not built yet", no_args_is_help=True)


@app.command("status", hidden=True)
def _status() -> None:
    not_built("replay traces", "see the open issues")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="traces")
