"""`replay run`'s fleet and process flags (issue 26): every bad one is refused before
anything starts, with a message naming the flag; good ones land in the run's spec."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.client.config import engines_from_flags
from replay.runspec.fields import MAX_REPLICAS, EngineShape
from replay.runspec.fleet import apply_fleet_flags, fleets_of, no_replicas
from replay.runspec.model import EngineRun, RunSpec
from replay.runspec.resolve import FLAGS, Layer, build


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["run", *args, "--no-panel"], catch_exceptions=False)


A, B = "http://127.0.0.1:9", "http://127.0.0.1:10"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engines", "vllm", "--router", "nope"], "--router nope: unknown router; choose one of"),
        (["--engines", "vllm", "--replicas", "0"], "--replicas 0: must be at least 1"),
        (["--engines", "vllm", "--workers", "0"], "--workers 0: must be at least 1"),
        (["--engines", "vllm", "--ray", " "], "--ray: give a Ray address"),
        (["--engines", "vllm", "--router", "external"], "--router external reads the replica"),
        (["--engines", "vllm", "--router", "cache_aware"], "no engine has replicas"),
        (["--endpoint", f"vllm={A}", "--replicas", "2"], "--replicas 2 starts that many emulators"),
        (["--endpoint", f"vllm={A}", "--router", "session_hash"], "no engine has replicas"),
        (["--endpoint", f"vllm={A},{B}", "--router", "external"], "give the router's one URL"),
        (["--endpoint", f"vllm={A},{A}"], f"replica {A} given twice"),
        # Issue 36: two spellings of one server became two replicas (each per-GPU figure halved).
        (["--endpoint", f"vllm={A},{A}/"], f"replica {A} and {A}/ are one server"),
        (
            ["--endpoint", "vllm=http://localhost:9,http://127.0.0.1:9"],
            "replica http://localhost:9 and http://127.0.0.1:9 are one server",
        ),
        (
            ["--endpoint", "vllm=http://[::1]:80/,http://localhost"],
            "replica http://[::1]:80/ and http://localhost are one server",
        ),
        (["--endpoint", f"vllm={A},ftp://x"], "replica URL 'ftp://x' must start with http://"),
    ],
)
def test_bad_fleet_flags_are_named(args: list[str], message: str) -> None:
    res = run(*args)
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split()), res.output
    assert "Traceback" not in res.output and "preflight" not in res.output


def test_replica_urls_and_flags_land_in_the_spec() -> None:
    (spec_engine,) = engines_from_flags(None, [f"vllm={A},{B}"])
    assert spec_engine.url == A and spec_engine.urls == [A, B]
    spec = RunSpec(engines=[EngineRun(engine=spec_engine, executor="live")])
    got = apply_fleet_flags(spec, router="cache_aware", workers=4, ray="local")
    assert got.workers == 4 and got.ray == "local"
    e = got.engines[0]
    assert (e.replicas, e.router) == (2, "cache_aware")
    assert fleets_of(got)["vllm"].urls == (A, B)
    # No --router: the client routes round-robin; one URL: no fleet at all.
    assert apply_fleet_flags(spec).engines[0].router == "round_robin"
    (lone,) = engines_from_flags(None, [f"vllm={A}"])
    one = RunSpec(engines=[EngineRun(engine=lone, executor="live")])
    assert fleets_of(apply_fleet_flags(one)) == {}
    ext = apply_fleet_flags(one, router="external")
    assert fleets_of(ext)["vllm"].router == "external"


def test_a_config_listing_one_server_twice_in_urls_is_refused(tmp_path: Any) -> None:
    from replay.client.config import ConfigError, load_config_file, replica_key

    path = tmp_path / "run.yaml"
    path.write_text(
        "engines:\n  - name: vllm\n    urls: [http://127.0.0.1:9000, http://localhost:9000/]\n"
    )
    with pytest.raises(ConfigError, match=r"engines\[0\]: field 'urls': replica http://127.0.0"
                       r".1:9000 and http://localhost:9000/ are one server"):  # fmt: skip
        load_config_file(path)
    # Different ports, paths or hosts stay different replicas.
    assert len({replica_key(u) for u in (A, B, f"{A}/v2", "http://10.0.0.1:9")}) == 4


def test_a_router_over_no_replicas_is_refused_in_one_wording_by_run_and_simulate() -> None:
    """`replay run` and `replay simulate` refuse `--router` without replicas with one message
    (`no_replicas`; issue 36: simulate ran one replica silently), each naming what to give."""
    said_run = " ".join(run("--engines", "vllm", "--router", "cache_aware").output.split())
    assert no_replicas("cache_aware") in said_run
    sim = CliRunner().invoke(app, ["simulate", "--policies", "vllm", "--router", "cache_aware"])
    assert sim.exit_code == 2
    said_sim = " ".join(sim.output.split())
    assert no_replicas("cache_aware", simulated=True) in said_sim
    common = "--router cache_aware: no engine has replicas to route between; give "
    assert common in said_run and common in said_sim
    assert "--replicas N" in said_sim and "--endpoint" not in said_sim


@pytest.mark.parametrize("command", ["run", "simulate"])
def test_replicas_past_the_fleet_limit_are_refused_naming_the_flag(command: str) -> None:
    """`EngineShape.replicas` is bounded (`MAX_REPLICAS`), on both commands, before any
    emulator or simulation starts."""
    picked = ["--engines", "vllm", "--no-panel"] if command == "run" else ["--policies", "vllm"]
    args = [command, *picked, "--replicas", str(MAX_REPLICAS + 1), "--router", "round_robin"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert (
        f"--replicas {MAX_REPLICAS + 1}: must be at most {MAX_REPLICAS} replicas (the most one "
        "engine's fleet may have)" in " ".join(res.output.split())
    )
    assert MAX_REPLICAS == 1024
    assert build(EngineShape, [Layer(FLAGS, {"replicas": MAX_REPLICAS})]).replicas == 1024
