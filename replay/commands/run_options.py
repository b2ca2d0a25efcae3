"""`replay run`'s own options: the settings it shares with other commands are the spec's
fields' flags (replay.runspec.flags)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

SLO_HELP = (
    "SLO thresholds over the defaults ttft=6,itl=0.175,e2e=none,slowdown=2 (seconds; slowdown "
    "= task time ÷ the trace's); 'none' drops one."
)
Engines = Annotated[
    str | None, typer.Option("--engines", help="Engines to compare, e.g. flashstate,vllm,sglang.")
]
Endpoint = Annotated[
    list[str] | None,
    typer.Option("--endpoint", help="NAME=URL (or NAME=KIND@URL) per engine; repeat."),
]
Config = Annotated[
    Path | None,
    typer.Option("--config", help="YAML listing engines (url, model, gpus, gpu_type, kind)."),
]
Resume = Annotated[
    Path | None, typer.Option("--resume", help="Continue an interrupted run directory.")
]
Panel = Annotated[bool, typer.Option("--panel/--no-panel", help="Live panel.")]
Slo = Annotated[str | None, typer.Option("--slo", help=SLO_HELP)]
Workers = Annotated[
    int | None,
    typer.Option("--workers", help="Client processes, each owning every K-th session (1)."),
]
Ray = Annotated[
    str | None,
    typer.Option("--ray", help="Run the client workers on this Ray cluster ('local': here)."),
]
EngineLog = Annotated[
    list[str] | None,
    typer.Option(
        "--engine-log",
        help="NAME=PATH: the server log of an engine you started (replay engines launch "
        "prints it); an engine that goes down gets its last error line in the run. Repeat.",
    ),
]
ResetCache = Annotated[
    bool,
    typer.Option(
        "--reset-cache",
        help="Reset each engine's prefix cache after preflight, before the first replay "
        "request (vLLM: VLLM_SERVER_DEV_MODE=1; SGLang: /flush_cache).",
    ),
]
BandSeeds = Annotated[
    int,
    typer.Option(
        "--band-seeds",
        min=0,
        help="Emulated runs: simulate the same point over this many seeds after the run "
        "(the seed band beside the final table; band.json). 0: none.",
    ),
]
