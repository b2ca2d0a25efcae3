"""What `replay run` would hand its emulators, without starting them (the run's flags to
each emulator's config: `--capacity-blocks`, `--host-memory-gb`, ...)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import replay.emulator.launch as launch
from replay.cli import app

CAPTURED = 7  # the exit code that says the emulators' configs were taken


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


@pytest.fixture
def emulators_of(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Callable[[list[str]], list[Any]]:
    """`replay run` with these flags (and an --out of its own) up to starting its
    emulators: the configs it would start them with, in order."""

    def run(flags: list[str]) -> list[Any]:
        seen: list[Any] = []

        def capture(configs: list[Any], **kwargs: Any) -> None:
            seen.extend(configs)
            raise typer.Exit(CAPTURED)

        monkeypatch.setattr(launch, "start_emulator_group", capture)
        res = CliRunner().invoke(app, ["run", *flags, "--out", str(tmp_path / "r"), "--no-panel"])
        assert res.exit_code == CAPTURED, said(res)
        return seen

    return run
