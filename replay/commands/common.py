"""Helpers shared by the command modules: the console and a uniform way to fail."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

console = Console()
err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error to stderr and exit with `code` (2: bad input). The message is
    plain text: brackets in it (`[start_s, end_s]`) are shown, not read as markup."""
    err_console.print(
        f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True, emoji=False
    )
    raise typer.Exit(code)
