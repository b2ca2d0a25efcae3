"""`replay simulate --replicas N --router P`: bad values name the flag and the choices, and a
small fleet runs end to end through the command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.fleet import router_names
from replay.profiles import DEFAULT_MODEL, load_profile
from replay.traces import sample_path


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


def _sim(tmp_path: Path, *extra: str) -> Any:
    args = ["simulate", "--trace", str(sample_path()), "--policies", "flashstate",
            "--sessions", "4", "--duration-min", "3", "--out", str(tmp_path / "o"), *extra]  # fmt: skip
    return CliRunner().invoke(app, args)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--replicas", "4", "--router", "best"], "--router best: unknown router; choose one of "),
        (["--replicas", "0", "--router", "round_robin"], "--replicas 0: must be at least 1"),
        (["--replicas", "2", "--router", "external"], "--router external: the simulator routes"),
        (["--replicas", "two", "--router", "round_robin"], "--replicas: 'two' is not a positive"),
        (["--replicas", "4"], "--router: give the router over the replicas (choose one of "),
        # A bad count is named before the missing router (it used to say only --router).
        (["--replicas", "0"], "--replicas 0: must be at least 1"),
        (["--replicas", "abc"], "--replicas: 'abc' is not a positive"),
        (["--replicas", "4", "--router", ","], "--router: give at least one router"),
        # Issue 36: a router without --replicas ran one replica silently; `replay run`'s words.
        (["--router", "round_robin"], "--router round_robin: no engine has replicas to route"),
    ],
)
def test_bad_fleet_flags_name_the_flag_and_the_choices(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    res = _sim(tmp_path, *extra)
    assert res.exit_code == 2, said(res)
    assert message in said(res)
    if "choose one of" in message:
        assert ", ".join(router_names()) in said(res)
    assert "Traceback" not in said(res)


def test_a_small_fleet_runs_through_the_command(tmp_path: Path) -> None:
    res = _sim(tmp_path, "--timing", "engine", "--replicas", "2", "--router", "state_aware",
               "--json")  # fmt: skip
    assert res.exit_code == 0, said(res)
    rows = json.loads(res.stdout[res.stdout.index("[") :])
    assert rows[0]["replicas"] == 2 and rows[0]["router"] == "state_aware"
    run = tmp_path / "o" / "flashstate-r2-state_aware-s4-seed0"
    summary = json.loads((run / "summary.json").read_text())
    eng = summary["engines"]["flashstate"]
    # per-replica figures (analysis.replicas) and every replica's GPUs in the per-GPU rates
    assert eng["replicas"] == 2
    assert [r["replica"] for r in eng["fleet"]["per_replica"]] == [0, 1]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["engines"][0]["gpus"] == 2 * load_profile(DEFAULT_MODEL).gpus
