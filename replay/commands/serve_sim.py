"""`replay serve-sim`: run one engine emulator (vLLM/FlashState or SGLang protocol).

The command itself lives with the emulator (`replay.emulator.cli`); this module gives
it the command line's console for its errors and its ready line, and the options every run
shares from the run spec's fields (--model, --time-scale, --token-scale, --capacity-blocks),
as `replay run` and `replay simulate` take them."""

from __future__ import annotations

import typer

from replay.commands.common import console, fail
from replay.emulator import cli
from replay.runspec.fields import EngineShape, WorkloadSpec
from replay.runspec.flags import option_default

SHARED = cli.SharedOptions(
    model=option_default(EngineShape, "profile"),
    time_scale=option_default(WorkloadSpec, "time_scale"),
    token_scale=option_default(WorkloadSpec, "token_scale"),
    blocks=option_default(EngineShape, "capacity_blocks"),
)


def _say(line: str) -> None:
    console.print(line, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    cli.register(app, fail=fail, say=_say, shared=SHARED)
