"""serve-sim's options that every run shares (--model, --time-scale, --token-scale,
--capacity-blocks/--blocks, --host-memory-gb, --host-bandwidth-gbs): `replay serve-sim` takes them from the run spec's fields, as
`replay run` and `replay simulate` do, and the emulator's own process (`python -m
replay.emulator`, which never imports the spec) under the same names from its config."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer
from typer.main import get_command

from replay.commands.serve_sim import SHARED
from replay.emulator.cli import SharedOptions, register
from replay.runspec.fields import EngineShape, WorkloadSpec, aliases_of, flag_of


def _names(shared: SharedOptions | None) -> dict[str, tuple[list[str], str | None]]:
    app = typer.Typer()
    register(app, shared=shared)
    app.command("other")(lambda: None)  # a group, so the command is found by name
    cmd = get_command(app).commands["serve-sim"]  # type: ignore[attr-defined]
    keys = ("model", "time_scale", "token_scale", "blocks", "host_memory_gb", "host_bandwidth_gbs")
    return {p.name: (sorted(p.opts), p.help) for p in cmd.params if p.name in keys}


def test_both_command_lines_name_the_shared_options_as_the_spec_does() -> None:
    spec = {
        "model": (EngineShape, "profile"),
        "time_scale": (WorkloadSpec, "time_scale"),
        "token_scale": (WorkloadSpec, "token_scale"),
        "blocks": (EngineShape, "capacity_blocks"),
        "host_memory_gb": (EngineShape, "host_memory_gb"),
        "host_bandwidth_gbs": (EngineShape, "host_bandwidth_gbs"),
    }
    replay_cli, emulator = _names(SHARED), _names(None)
    assert replay_cli.keys() == emulator.keys() == spec.keys()
    for key, (model, field) in spec.items():
        info = model.model_fields[field]
        flags = sorted([flag_of(info) or "", *aliases_of(info)])
        assert replay_cli[key] == (flags, info.description)
        assert emulator[key][0] == flags  # the same names, the emulator config's words


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--time-scale", "inf"], "error: --time-scale: Input should be a finite number"),
        (
            ["--token-scale", "1e300"],
            "error: --token-scale: must be a finite number of at least 1 and at most 1,048,576",
        ),
        (
            ["--capacity-blocks", str(2**63)],
            "error: --capacity-blocks (--blocks): Input should be less than or equal to "
            "9223372036854775807",
        ),
    ],
)
def test_serve_sim_keeps_the_run_specs_ranges(flags: list[str], line: str) -> None:
    """`replay run` refuses these; `replay serve-sim` used to serve an infinite clock, a token
    scale of 1e300 (every length 1 token) and a cache past 64 bits. Bounded: a value the check
    passes would serve until the timeout."""
    cmd = [sys.executable, "-m", "replay", "serve-sim", "--engine", "vllm", "--port", "0", *flags]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and said.startswith(line), said
    assert "Traceback" not in said
