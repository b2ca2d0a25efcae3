"""`replay simulate --ray local` on a real local Ray instance (the optional `ray` extra):
the same rows as the in-process sweep. Skipped only where Ray is not installed."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from replay.cli import app

ray = pytest.importorskip("ray")
runner = CliRunner()


@pytest.mark.slow
def test_ray_sweep_matches_the_local_one(small_corpus, tmp_path):
    args = [
        "simulate",
        "--trace",
        str(small_corpus),
        "--policies",
        "vllm,flashstate",
        "--sessions",
        "2",
        "--duration-min",
        "20",
        "--window",
        "5-20",
        "--capacity-blocks",
        "400",
        "--json",
    ]
    local = runner.invoke(app, [*args, "--out", str(tmp_path / "local")])
    try:
        remote = runner.invoke(app, [*args, "--out", str(tmp_path / "ray"), "--ray", "local"])
    finally:
        ray.shutdown()
    assert local.exit_code == 0 and remote.exit_code == 0, remote.output
    strip = lambda out: [  # noqa: E731
        {k: v for k, v in r.items() if k != "wall_seconds"} for r in json.loads(out)
    ]
    assert strip(remote.stdout) == strip(local.stdout)
    assert (tmp_path / "ray" / "flashstate-s2-seed0" / "requests.parquet").exists()


def test_ray_address_errors_are_reported(small_corpus, tmp_path):
    res = runner.invoke(
        app,
        [
            "simulate",
            "--trace",
            str(small_corpus),
            "--policies",
            "vllm",
            "--sessions",
            "2",
            "--out",
            str(tmp_path / "o"),
            "--ray",
            "ray://127.0.0.1:1",
        ],
    )
    assert res.exit_code == 2
    assert "--ray ray://127.0.0.1:1: nothing answers at 127.0.0.1:1 within 3 s" in res.output
