"""A small engine profile for the engine-model tests (`replay.sim.engine.core` and the emulator's
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


def hybrid_profile(blocks: int = 400) -> ModelProfile:
    """The GLM shape in miniature for the cache tests beside the engines' own code:
    16-token blocks, a state of two blocks, chunks of two blocks, the paper's D and E."""
    return ModelProfile(
        name="tiny",
        model="tiny hybrid",
        gpus=1,
        block_tokens=16,
        blocks_per_engine=blocks,
        checkpoint_blocks=2,
        prefill_cost_d=1.862e-5,
        prefill_cost_e=3.33e-6,
        cost_unit_tokens=100,
        chunk_tokens=32,
        context_tokens=4096,
    )
