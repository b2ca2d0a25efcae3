"""`replay serve-sim`: run one engine emulator (vLLM/FlashState or SGLang protocol).

The command itself lives with the emulator (`replay.emulator.cli`); this module gives
it the command line's console for its errors and its ready line."""

from __future__ import annotations

import typer

from replay.commands.common import console, fail
from replay.emulator import cli


def _say(line: str) -> None:
    console.print(line, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    cli.register(app, fail=fail, say=_say)
