"""`replay run` and `replay serve-sim` take simulate's host-memory tier (issue 34):
`--host-memory-gb` and `--host-bandwidth-gbs`, the same fields and flags
(`EngineShape.host_memory_gb`, `host_bandwidth_gbs`), carried from the resolved spec to each
emulator's config and command line, where its cache gets the tier; refused, naming the flag,
where they cannot apply (real engines, --resume, a value out of the field's range)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.emulator.config import emulator_config, from_child_args, make_cache
from replay.runspec.live import RunFlags, finish, resolve_new
from tests.unit.replay.runspec.conftest import said


def test_the_flags_reach_every_emulated_engine_of_the_spec() -> None:
    from replay.traces import load_trace, sample_path

    res = resolve_new(RunFlags(engines="vllm,sglang", host_memory_gb=64, host_bandwidth_gbs=32))
    tiers = [(e.host_memory_gb, e.host_bandwidth_gbs) for e in res.spec.engines]
    assert tiers == [(64, 32), (64, 32)]
    spec = finish(res, load_trace(sample_path()), True, None)
    assert [(e.host_memory_gb, e.host_bandwidth_gbs) for e in spec.engines] == tiers
    # As `replay simulate` keeps them: 0 is no tier, and a bandwidth without memory is none.
    for flags in (RunFlags(engines="vllm", host_memory_gb=0), RunFlags(engines="vllm")):
        e = resolve_new(flags).spec.engines[0]
        assert (e.host_memory_gb, e.host_bandwidth_gbs) == (None, None)
    e = resolve_new(RunFlags(engines="vllm", host_bandwidth_gbs=10)).spec.engines[0]
    assert (e.host_memory_gb, e.host_bandwidth_gbs) == (None, None)


def test_the_flags_reach_the_emulators_config_and_command_line(emulators_of: Any) -> None:
    seen = emulators_of(["--engines", "vllm,sglang", "--host-memory-gb", "512",
                         "--host-bandwidth-gbs", "64", "--replicas", "2"])  # fmt: skip
    got = [(c.engine, c.host_memory_gb, c.host_bandwidth_gbs) for c in seen]
    assert got == [("vllm", 512, 64)] * 2 + [("sglang", 512, 64)] * 2
    child = from_child_args(seen[0].child_args())  # the child process's config, whole
    assert child is not None and (child.host_memory_gb, child.host_bandwidth_gbs) == (512, 64)
    # The emulator's cache is the simulator's with its host tier (512 GiB: 10,375 blocks).
    cache: Any = make_cache(seen[0], seen[0].resolved_profile())
    assert cache.host is not None and cache.host.bandwidth == 64e9 * 2
    untiered = emulator_config("vllm", port=0)
    assert from_child_args(untiered.child_args()) == untiered
    assert getattr(make_cache(untiered, untiered.resolved_profile()), "host", None) is None


REAL = ["--endpoint", "vllm=http://127.0.0.1:9"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            [*REAL, "--host-memory-gb", "512"],
            "--host-memory-gb 512: gives the emulated engines a host-memory tier only (no "
            "--endpoint, or a --config without urls); a real engine's host tier is its own "
            "server's flags (vLLM's KV offloading connector, SGLang's --hicache-size)",
        ),
        (
            [*REAL, "--host-memory-gb", "8", "--host-bandwidth-gbs", "64"],
            "--host-memory-gb 8, --host-bandwidth-gbs 64: gives the emulated engines a "
            "host-memory tier only",
        ),
        (
            ["--resume", "somewhere", "--host-memory-gb", "512"],
            "with the workload it was started with; drop --host-memory-gb",
        ),
        (
            ["--resume", "somewhere", "--host-bandwidth-gbs", "64"],
            "with the workload it was started with; drop --host-bandwidth-gbs",
        ),
        (["--host-memory-gb", "-1"], "--host-memory-gb -1: must be 0 or more"),
        (["--host-memory-gb", "8", "--host-bandwidth-gbs", "0"], "--host-bandwidth-gbs 0: must"),
    ],
)
def test_run_refuses_a_host_tier_that_cannot_apply_naming_the_flag(
    args: list[str], message: str
) -> None:
    res = CliRunner().invoke(app, ["run", *args, "--no-panel"], catch_exceptions=False)
    assert res.exit_code == 2, said(res)
    assert message in said(res)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host-memory-gb", "-1"], "--host-memory-gb -1: must be 0 or more"),
        (["--host-memory-gb", "2000000"], "--host-memory-gb 2e+06: must be at most 1048576"),
        (["--host-memory-gb", "nan"], "--host-memory-gb nan: must be a number, not NaN"),
        (["--host-bandwidth-gbs", "0"], "--host-bandwidth-gbs 0: must be positive"),
        (
            ["--policy", "kv-lru", "--host-memory-gb", "8"],
            "--host-memory-gb 8: policy 'kv-lru' (a plain KV cache) has no host tier",
        ),
    ],
)
def test_serve_sim_refuses_a_host_tier_naming_the_flag(args: list[str], message: str) -> None:
    res = CliRunner().invoke(app, ["serve-sim", "--engine", "vllm", "--port", "0", *args])
    assert res.exit_code == 2, said(res)
    assert message in said(res)
