"""Helpers shared by the command modules: the console and a uniform way to fail."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error to stderr and exit with `code` (2: bad input)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def not_built(command: str, issue: str) -> NoReturn:
    """For a command whose capability has not landed yet: say so plainly, exit 3."""
    err_console.print(
        f"[yellow]'{command}' is not built yet[/] ({issue}); nothing was run.", highlight=False
    )
    raise typer.Exit(3)
