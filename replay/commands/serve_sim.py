"""`replay serve-sim`: run one engine emulator (vLLM/FlashState or SGLang protocol).

The command itself lives with the emulator (`replay.emulator.cli`); this module gives
it the command line's console for its errors and its ready line, and the options every run
shares from the run spec's fields (--model, --time-scale, --token-scale, --capacity-blocks,
--host-memory-gb, --host-bandwidth-gbs), as `replay run` and `replay simulate` take them, and
the fields' own check of their range."""

from __future__ import annotations

from typing import Any

import typer

from replay.commands.common import console, fail
from replay.emulator import cli
from replay.runspec.fields import EngineShape, WorkloadSpec
from replay.runspec.flags import option_default
from replay.runspec.resolve import FLAGS, Layer, SpecError, build


def _check(values: dict[str, Any]) -> str | None:
    """The host tier's flags in their fields' range (`EngineShape`, as `replay simulate` and
    `replay run` check them): the refusal naming the flag, or None."""
    try:
        build(EngineShape, [Layer(FLAGS, values)])
    except SpecError as e:
        return str(e)
    return None


SHARED = cli.SharedOptions(
    model=option_default(EngineShape, "profile"),
    time_scale=option_default(WorkloadSpec, "time_scale"),
    token_scale=option_default(WorkloadSpec, "token_scale"),
    blocks=option_default(EngineShape, "capacity_blocks"),
    host_memory_gb=option_default(EngineShape, "host_memory_gb"),
    host_bandwidth_gbs=option_default(EngineShape, "host_bandwidth_gbs"),
    external_memory_gb=option_default(EngineShape, "external_memory_gb"),
    external_bandwidth_gbs=option_default(EngineShape, "external_bandwidth_gbs"),
    external_store=option_default(EngineShape, "external_store"),
    check=_check,
)


def _say(line: str) -> None:
    console.print(line, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    cli.register(app, fail=fail, say=_say, shared=SHARED)
