"""A small engine profile for the engine-model tests (`replay.sim.engine` and the emulator's
runner): 64-token blocks, 100 of them, a one-block state, a cheap linear prefill."""

from __future__ import annotations

from replay.profiles import ModelProfile


def engine_profile(**overrides: object) -> ModelProfile:
    """The tiny engine profile, with `overrides` of any `ModelProfile` field."""
    base: dict[str, object] = dict(
        name="tiny",
        model="tiny",
        gpus=1,
        block_tokens=64,
        blocks_per_engine=100,
        checkpoint_blocks=1,
        prefill_cost_d=1e-4,
        prefill_cost_e=0.0,
        decode_s_per_step=0.01,
        decode_s_per_seq=0.001,
        chunk_tokens=256,
        prefill_cap_tokens=256,
        max_batched_tokens=4096,
        max_batch=4,
        vocab_size=32000,
    )
    base.update(overrides)
    return ModelProfile.model_validate(base)
