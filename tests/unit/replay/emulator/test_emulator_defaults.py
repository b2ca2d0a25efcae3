"""The embedded default's settings, the scaled profile, and the cache settings shared with
the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.emulator.config import EmulatorConfig, make_cache
from replay.emulator.defaults import (
    DefaultRunError,
    default_run_path,
    load_default_run,
    sample_token_scale,
)
from replay.profiles import load_profile
from replay.sim.cache.cost import PrefillCost
from replay.sim.cache.policies import SglangPolicy
from replay.sim.engine.cache import cache_settings
from replay.sim.engine.scale import scaled_profile


def test_scaled_profile_keeps_blocks_per_context_and_prefill_seconds() -> None:
    base = load_profile("glm-5.3-flash")
    s = scaled_profile(base, 16)
    assert s.block_tokens == 272 and s.chunk_tokens == 544
    assert s.blocks_per_engine == base.blocks_per_engine == 2531  # per engine, not per GPU
    # The scheduler's budgets keep their real values (a scaled step is 16 real steps).
    assert s.max_batched_tokens == 16384 and s.prefill_cap_tokens == 8704
    assert s.context_tokens == base.context_tokens // 16
    # A scaled span costs what the full-size span costs (linear and quadratic terms).
    for a, b in ((0, 142_000), (100_000, 150_000), (0, 900_000)):
        assert PrefillCost(s).seconds(a / 16, b / 16) == pytest.approx(
            PrefillCost(base).seconds(a, b)
        )
        # The engine clock's calibration is a plain factor, so it carries over unchanged.
        assert PrefillCost(s).clock_seconds(a / 16, b / 16) == pytest.approx(
            PrefillCost(base).clock_seconds(a, b)
        )
    assert s.decode_s_per_step == base.decode_s_per_step
    assert s.clock_prefill_scale == base.clock_prefill_scale
    assert scaled_profile(base, 1) is base
    with pytest.raises(ValueError, match="token_scale must be >= 1"):
        scaled_profile(base, 0.5)


def test_shipped_default_file_loads_and_takes_the_samples_own_scale_of_16() -> None:
    d = load_default_run()
    assert default_run_path().name == "default.yaml"
    assert d.engines == ["flashstate", "vllm", "sglang"]
    # The trace is the source of truth: the file names no scale, the sample declares 16.
    assert d.token_scale is None and d.trace == "sample"
    assert sample_token_scale() == 16
    cfgs = d.emulator_configs()
    assert [c.engine for c in cfgs] == d.engines
    assert all(c.token_scale == 16 and c.time_scale == d.time_scale and c.port == 0 for c in cfgs)


OWN_CHOICES = "engines: [vllm]\ntrace: sample\nmodel: glm-5.3-flash\ntime_scale: 30\n"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (OWN_CHOICES + "sessions: 0\n", "field 'sessions'"),
        (OWN_CHOICES + "nonsense: 1\n", "field 'nonsense'"),
        ("engines: [vllm]\ntrace: sample\nmodel: glm-5.3-flash\n", "field 'time_scale'"),
        ("sessions: 32\n", "field 'engines': Field required"),
        ("- a\n- b\n", "expected a mapping"),
        ("sessions: [\n", "not valid YAML"),
    ],
)
def test_a_bad_default_file_names_the_file_and_field(
    tmp_path: Path, text: str, needle: str
) -> None:
    """The embedded default's own choices (engines, trace, model, time scale) live only in
    its file, so a file without one is refused naming it."""
    path = tmp_path / "default.yaml"
    path.write_text(text)
    with pytest.raises(DefaultRunError, match=r"default\.yaml") as err:
        load_default_run(path)
    assert needle in str(err.value)


def test_missing_file_gives_the_shipped_file(tmp_path: Path) -> None:
    assert load_default_run(tmp_path / "none.yaml") == load_default_run(default_run_path())


def test_the_workload_not_named_in_the_file_is_the_workload_configs(tmp_path: Path) -> None:
    from replay.workload import DEFAULT_WORKLOAD as W
    from replay.workload import TIMED_WARMUP_S

    path = tmp_path / "default.yaml"
    path.write_text(OWN_CHOICES)
    d = load_default_run(path)
    assert (d.sessions, d.duration_min * 60, d.seed) == (W.sessions, W.duration_s, W.seed)
    assert (d.window[0] * 60, d.window[1] * 60) == W.window
    assert d.warmup_s == TIMED_WARMUP_S
    path.write_text(OWN_CHOICES + "sessions: 32\n")  # a value the file names wins
    assert load_default_run(path).sessions == 32


def test_cache_settings_scale_token_options_and_resize_sglang_pools() -> None:
    base = load_profile("glm-5.3-flash")
    prof = scaled_profile(base, 16)
    sg = cache_settings("sglang", prof, 16)
    assert sg.options["grid"] == 16 and sg.options["chunk"] == 16384 // 16
    assert sg.options["kv_tokens"] == round(SglangPolicy.options["kv_tokens"] / 16)
    assert sg.capacity_blocks is None
    half = cache_settings("sglang", prof, 16, capacity_blocks=1000)
    assert half.options["state_slots"] < SglangPolicy.options["state_slots"]
    v = cache_settings("vllm", prof, 16, capacity_blocks=1000)
    assert v.options == {} and v.capacity_blocks == 1000
    cache = make_cache(EmulatorConfig(engine="sglang", token_scale=16, blocks=1000), prof)
    assert cache.capacity_blocks is not None and abs(cache.capacity_blocks - 1000) <= 5


def test_unknown_policy_is_refused_with_the_known_names() -> None:
    cfg = EmulatorConfig(engine="vllm", policy="nope")
    with pytest.raises(ValueError, match=r"unknown policy 'nope'.*flashstate"):
        make_cache(cfg, cfg.resolved_profile())
