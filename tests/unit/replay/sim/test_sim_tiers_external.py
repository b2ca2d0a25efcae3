"""The external store behind host memory (replay/sim/cache/tiers.py rule 5, issue 34): what
host memory drops a Mooncake store keeps and serves, through host memory at its own
bandwidth; an LMCache store holds KV only, so a hybrid resume finds no state there; and the
command line takes it, records it and refuses it without host memory in front."""

from __future__ import annotations

import csv
from dataclasses import replace

import pandas as pd
import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.profiles import ModelProfile
from replay.rundir import read_manifest
from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.keys import TokenPrefix
from replay.sim.cache.policies import make_policy
from replay.sim.cache.tiers import TierError, attach_external, attach_host_tier, check_external
from replay.sim.engine.cache import SimCache, cache_settings

B = 16
A_IDS = list(range(64))  # a 64-token prompt: vLLM keeps its state at 48
A_OUT = list(range(1000, 1016))
B_IDS = A_IDS + A_OUT + list(range(2000, 2032))  # the next turn: 112 tokens


def _profile() -> ModelProfile:
    """16-token blocks of 1 GiB each (so GiB are blocks), a two-block state."""
    return ModelProfile(
        name="tiny",
        model="tiny hybrid",
        gpus=1,
        block_tokens=B,
        blocks_per_engine=60,
        checkpoint_blocks=2,
        cache_gib_per_gpu=60.0,
        prefill_cost_d=1.862e-5,
        prefill_cost_e=3.33e-6,
        cost_unit_tokens=100,
        chunk_tokens=32,
        context_tokens=4096,
    )


def _cache(host_gb: float, ext_gb: float = 0.0, store: str = "mooncake") -> HybridCache:
    prof = _profile()
    cache = make_policy("vllm", prof).make_cache(prof)
    tier = attach_host_tier(cache, "vllm", prof, host_gb)
    if ext_gb:
        attach_external(tier, prof, ext_gb, 10.0, store)
    p = TokenPrefix(A_IDS, B)
    h = cache.begin(p, 64, cache.lookup(p, 64, 0.0), 0.0)
    assert cache.reserve(h, 80, 0.0)
    cache.prefill_done(h, 0.0)
    cache.finish(h, TokenPrefix(A_IDS + A_OUT, B), 80, 1.0)
    assert cache.capacity is not None
    assert cache.make_room(cache.capacity, 0, 2.0)  # everything leaves the GPU
    return cache


def test_what_host_memory_drops_the_store_serves_and_loads_back() -> None:
    small = _cache(host_gb=2.0)  # room for one state or two blocks: the prefix is lost
    assert small.lookup(TokenPrefix(B_IDS, B), 112, 3.0).resume_pos == 0
    cache = _cache(host_gb=2.0, ext_gb=40.0)
    host, ext = cache.host, cache.host.external
    assert ext is not None and ext.blocks and ext.states  # host memory's drops
    assert not set(ext.blocks) & set(host.blocks) and not set(ext.states) & set(host.states)
    info = cache.lookup(TokenPrefix(B_IDS, B), 112, 3.0)
    assert info.resume_pos == 48
    assert info.external_tokens > 0 and info.host_tokens + info.external_tokens == 48
    assert info.external_load_blocks > 0
    assert info.load_blocks + info.external_load_blocks == 3 + 2  # three blocks, the state
    res = info.resume()
    assert (res.cached, res.cached_host, res.cached_external) == (
        48,
        info.host_tokens,
        info.external_tokens,
    )
    h = cache.begin(TokenPrefix(B_IDS, B), 112, info, 3.0)
    assert cache.reserve(h, 128, 3.0)
    cache.prefill_done(h, 3.0)
    assert not any(b in ext.blocks for b in h.pinned[:3])  # GPU-resident again
    assert ext.loads == 1


def test_an_lmcache_store_holds_kv_but_no_state_so_a_hybrid_resume_misses() -> None:
    cache = _cache(host_gb=2.0, ext_gb=40.0, store="lmcache")
    ext = cache.host.external
    assert ext is not None and len(ext.blocks) >= 3 and not ext.states  # KV present
    info = cache.lookup(TokenPrefix(B_IDS, B), 112, 3.0)
    assert info.resume_pos == 0 and info.external_tokens == 0  # state missing: no hit
    assert info.resume().cached_external == 0


def test_the_store_keeps_at_most_its_room_least_recent_out() -> None:
    cache = _cache(host_gb=2.0, ext_gb=4.0)  # 4 blocks, less the host's copies
    ext = cache.host.external
    assert ext is not None and ext.evictions > 0
    held = len(cache.host.blocks) + 2 * len(cache.host.states)
    assert len(ext.blocks) + 2 * len(ext.states) <= 4 - held


def test_a_load_from_the_store_takes_its_bandwidth_after_the_host_link() -> None:
    prof = _profile()
    settings = cache_settings("vllm", prof)
    seconds = {}
    for bw in (1.0, 4.0):
        sim = SimCache(
            replace(
                settings,
                host_memory_gb=2.0,
                host_bandwidth_gbs=8.0,
                external_memory_gb=40.0,
                external_bandwidth_gbs=bw,
            )
        )
        assert sim.host is not None and sim.host.external is not None
        ext_only = _cache(host_gb=2.0, ext_gb=40.0)
        info = ext_only.lookup(TokenPrefix(B_IDS, B), 112, 3.0)
        seconds[bw] = sim.host.load_seconds(info)
        gib = 1 << 30
        want = info.load_blocks * gib / 8e9 + info.external_load_blocks * gib / (bw * 1e9)
        assert seconds[bw] == pytest.approx(want)
    assert seconds[1.0] > seconds[4.0]


@pytest.mark.parametrize(
    ("host", "ext", "store", "message"),
    [
        (0.0, 8.0, "mooncake", "--external-memory-gb 8: the external store sits behind host"),
        (8.0, 0.0, "mooncake", "--external-store mooncake: needs --external-memory-gb"),
        (8.0, -1.0, "mooncake", "--external-memory-gb -1: the external store's size must be"),
        (8.0, 8.0, "redis", "--external-store redis: not a store the model knows"),
    ],
)
def test_a_store_that_cannot_be_built_is_refused_naming_the_flag(
    host: float, ext: float, store: str, message: str
) -> None:
    with pytest.raises(TierError, match=message):
        check_external(host, ext, store)


runner = CliRunner()
ARGS = [
    "simulate",
    "--policies",
    "vllm,sglang",
    "--sessions",
    "8",
    "--timing",
    "engine",
    "--duration-min",
    "12",
    "--window",
    "4-12",
    "--seed",
    "1",
    "--capacity-blocks",
    "300",
]


def test_external_memory_gb_gives_a_third_tier_and_its_hits(tmp_path) -> None:
    out = tmp_path / "tiered"
    args = ["--host-memory-gb", "20", "--external-memory-gb", "60", "--out", str(out)]
    res = runner.invoke(app, [*ARGS, *args])
    assert res.exit_code == 0, res.output
    with (out / "summary.csv").open() as fh:
        rows = {r["policy"]: r for r in csv.DictReader(fh)}
    for policy in ("vllm", "sglang"):
        row = rows[policy]
        assert 0 < float(row["external_hit_rate"]) <= float(row["hit_rate"])
        df = pd.read_parquet(out / f"{policy}-s8-seed1" / "requests.parquet")
        ok = df[df.status == "ok"]
        assert ok.cached_tokens_external.sum() > 0
        assert (ok.cached_tokens_host + ok.cached_tokens_external <= ok.cached_tokens).all()
        spec = read_manifest(out / f"{policy}-s8-seed1").spec
        assert spec is not None and spec["engines"][0]["external_memory_gb"] == 60


def test_a_host_only_run_has_no_external_figures(tmp_path) -> None:
    out = tmp_path / "host"
    res = runner.invoke(app, [*ARGS, "--host-memory-gb", "20", "--out", str(out)])
    assert res.exit_code == 0, res.output
    with (out / "summary.csv").open() as fh:
        assert all("external_hit_rate" not in r for r in csv.DictReader(fh))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--external-memory-gb", "64"], "give --host-memory-gb too"),
        (["--host-memory-gb", "8", "--external-store", "s3"], "--external-store s3: unknown"),
        (["--host-memory-gb", "8", "--external-memory-gb", "-1"], "--external-memory-gb -1"),
    ],
)
def test_a_bad_external_store_is_refused_in_one_line(tmp_path, extra, message) -> None:
    res = runner.invoke(app, [*ARGS, *extra, "--out", str(tmp_path / "x")])
    assert res.exit_code != 0 and message in res.output
    assert "Traceback" not in res.output
