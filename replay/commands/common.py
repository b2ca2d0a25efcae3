"""Helpers shared by the command modules: the console and a uniform way to fail."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from analysis.manifest import Window

console = Console()
err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error to stderr and exit with `code` (2: bad input). The message is
    plain text: brackets in it (`[start_s, end_s]`) are shown, not read as markup."""
    err_console.print(
        f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True, emoji=False
    )
    raise typer.Exit(code)


def window_option(text: str | None, flag: str = "--window") -> Window | None:
    """A command's `--window A-B` (minutes, as every command takes it) as a seconds window
    for analysis; None when not given. Bad input fails naming the flag."""
    if text is None:
        return None
    from analysis.manifest import Window
    from replay.windows import WindowError, parse_window_min, seconds

    try:
        lo, hi = seconds(parse_window_min(text, flag))
    except WindowError as e:
        fail(str(e))
    return Window(lo, hi, f"{flag} {text} min")
