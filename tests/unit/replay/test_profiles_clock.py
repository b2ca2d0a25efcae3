"""The engine clock (`PrefillCost.clock_seconds`) is calibrated apart from the restore cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.profiles import ModelProfile, ProfileError, load_profile, profiles_dir
from replay.sim.cache.cost import PrefillCost


def _profile(**kw: object) -> ModelProfile:
    base: dict[str, object] = dict(
        name="t",
        model="t",
        block_tokens=64,
        blocks_per_engine=10,
        checkpoint_blocks=1,
        prefill_cost_d=1e-4,
        prefill_cost_e=2e-5,
        cost_unit_tokens=1000,
    )
    base.update(kw)
    return ModelProfile.model_validate(base)


def test_clock_is_the_restore_cost_scaled_and_leaves_the_restore_cost_alone() -> None:
    one, half = _profile(), _profile(clock_prefill_scale=0.5)
    assert one.clock_prefill_scale == 1.0  # unset: the clock is the restore cost
    for a, b in ((0, 5000), (3000, 5000), (4999, 5000)):
        assert PrefillCost(one).clock_seconds(a, b) == pytest.approx(PrefillCost(one).seconds(a, b))
        assert PrefillCost(half).clock_seconds(a, b) == pytest.approx(
            0.5 * PrefillCost(one).seconds(a, b)
        )
        assert PrefillCost(half).seconds(a, b) == pytest.approx(PrefillCost(one).seconds(a, b))
    assert PrefillCost(half).clock_seconds(5000, 5000) == 0.0
    # Additive over chunks, as the engines charge it chunk by chunk.
    chunks = sum(PrefillCost(half).clock_seconds(a, a + 1000) for a in range(0, 5000, 1000))
    assert chunks == pytest.approx(PrefillCost(half).clock_seconds(0, 5000))


def test_glm_clock_is_the_fit_to_the_sources_operating_points() -> None:
    """configs/models/glm-5.3-flash.yaml holds scripts/fit_clock.py's fit (rounded), and the
    fitted clock gives back both engines' step times at their published operating points."""
    from tests.scripts import load_script

    fit = load_script("fit_clock")
    c0, c1, k = fit.fit()
    p = load_profile("glm-5.3-flash")
    assert p.decode_s_per_step == pytest.approx(c0, rel=0.01)
    assert p.decode_s_per_seq == pytest.approx(c1, rel=0.01)
    assert p.clock_prefill_scale == pytest.approx(k, rel=0.01)
    for engine in ("flashstate", "vllm"):
        step, decoding, computed, per_token = fit.operating_point(engine)
        model = c0 + c1 * decoding + k * per_token * computed
        assert model == pytest.approx(step, rel=1e-6)
    # GDS priorities keep the paper's fitted coefficients: the restore cost is unchanged.
    assert PrefillCost(p).seconds(0, 150_000) == pytest.approx(
        1.862e-5 * 150_000 + 3.33e-6 * 15**2 / 2 * 10_000
    )
    assert p.blocks_per_engine == 2531 and p.max_batched_tokens == 16384


def test_a_non_positive_clock_scale_is_refused_naming_the_field(tmp_path: Path) -> None:
    text = (profiles_dir() / "glm-5.3-flash.yaml").read_text()  # the shipped file, one change
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("clock_prefill_scale:", "clock_prefill_scale: 0 #"))
    with pytest.raises(ProfileError, match=r"bad.yaml: field 'clock_prefill_scale'"):
        load_profile(bad)
