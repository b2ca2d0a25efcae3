"""A fleet sweep over replicas × routers on a real local Ray instance gives the rows of the
in-process sweep (the optional `ray` extra; skipped where Ray is not installed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app

ray = pytest.importorskip("ray")


@pytest.mark.slow
def test_fleet_sweep_on_ray_matches_the_local_one(small_corpus: Path, tmp_path: Path) -> None:
    args = ["simulate", "--trace", str(small_corpus), "--policies", "flashstate",
            "--sessions", "4", "--duration-min", "10", "--window", "3-10",
            "--replicas", "1,2", "--router", "session_hash,state_aware", "--json"]  # fmt: skip
    runner = CliRunner()
    local = runner.invoke(app, [*args, "--out", str(tmp_path / "local")])
    try:
        remote = runner.invoke(app, [*args, "--out", str(tmp_path / "ray"), "--ray", "local"])
    finally:
        ray.shutdown()
    assert local.exit_code == 0 and remote.exit_code == 0, remote.output

    def strip(out: str) -> list[dict[str, object]]:
        return [{k: v for k, v in r.items() if k != "wall_seconds"} for r in json.loads(out)]

    rows = strip(local.stdout)
    assert strip(remote.stdout) == rows
    assert [(r["replicas"], r["router"]) for r in rows] == [
        (1, "session_hash"), (1, "state_aware"), (2, "session_hash"), (2, "state_aware")
    ]  # fmt: skip
    assert (tmp_path / "ray" / "flashstate-r2-state_aware-s4-seed0" / "requests.parquet").exists()
