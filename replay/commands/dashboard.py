"""`replay dashboard`: not built yet."""

from __future__ import annotations

import typer

from replay.commands.common import not_built


def register(app: typer.Typer) -> None:
    @app.command(
        "dashboard", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
    )
    def _cmd() -> None:
        """Not built yet."""
        not_built("replay dashboard", "see the open issues")
