"""`replay run` takes simulate's external store (issue 34, tiers rule 5): the three flags
reach every emulated engine's spec, its emulator's config and command line, where its cache
gets the store behind its host tier; refused, naming the flag, where they cannot apply (no
host memory, an unknown store, real engines, --resume)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.emulator.config import from_child_args, make_cache
from replay.runspec.live import RunFlags, resolve_new
from tests.unit.replay.runspec.conftest import said


def test_the_store_reaches_every_emulated_engine_of_the_spec() -> None:
    flags = RunFlags(engines="vllm,sglang", host_memory_gb=64, external_memory_gb=448)
    flags.external_store = "lmcache"
    got = [
        (e.host_memory_gb, e.external_memory_gb, e.external_store)
        for e in resolve_new(flags).spec.engines
    ]
    assert got == [(64, 448, "lmcache")] * 2
    e = resolve_new(RunFlags(engines="vllm", host_memory_gb=64)).spec.engines[0]
    assert (e.external_memory_gb, e.external_store) == (None, None)


def test_the_store_reaches_the_emulators_config_and_cache(emulators_of: Any) -> None:
    seen = emulators_of(["--engines", "vllm", "--host-memory-gb", "64",
                         "--external-memory-gb", "448", "--external-bandwidth-gbs", "20"])  # fmt: skip
    cfg = seen[0]
    assert (cfg.external_memory_gb, cfg.external_bandwidth_gbs) == (448, 20)
    assert from_child_args(cfg.child_args()) == cfg  # the child process's config, whole
    cache: Any = make_cache(cfg, cfg.resolved_profile())
    assert cache.host is not None and cache.host.external is not None
    assert cache.host.external.bandwidth == 20e9 * 2 and cache.host.external.holds_states


REAL = ["--endpoint", "vllm=http://127.0.0.1:9"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--external-memory-gb", "64"], "--external-memory-gb 64: the external store sits"),
        (["--host-memory-gb", "8", "--external-store", "s3"], "--external-store s3: unknown"),
        ([*REAL, "--host-memory-gb", "8", "--external-memory-gb", "64"], "--external-memory-gb 64"),
        (["--resume", "somewhere", "--external-memory-gb", "64"], "drop --external-memory-gb"),
    ],
)
def test_run_refuses_a_store_that_cannot_apply_naming_the_flag(
    args: list[str], message: str
) -> None:
    res = CliRunner().invoke(app, ["run", *args, "--no-panel"], catch_exceptions=False)
    assert res.exit_code == 2, said(res)
    assert message in said(res)
