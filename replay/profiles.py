"""Model profiles: an engine's memory and cost model in its own units (`configs/models/`).

A profile is what the simulator and the emulators need to know about a model served on a
given GPU pair: how big a KV block is, how many fit, what a recurrent checkpoint costs, and
how long prefill and decode take. Add a profile by dropping a YAML file with these fields
into `configs/models/`; the file's stem is its name.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replay.config_paths import config_subdir, read_yaml_mapping, subdir_blame
from replay.field_errors import first_field_error
from replay.strict_numbers import Number, Whole

# The profile everything runs on unless told otherwise: the paper's hybrid model
# (configs/models/glm-5.3-flash.yaml).
DEFAULT_MODEL = "glm-5.3-flash"


class ProfileError(Exception):
    """A profile that is missing or malformed; the message names the file and field."""


class ModelProfile(BaseModel):
    """One model on one engine configuration, in the engine's units (per engine, not per GPU,
    unless a field says otherwise)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="profile name (the YAML file's stem)")
    model: str = Field(description="the model served, e.g. GLM-5.3-Flash NVFP4")
    source: str = Field("", description="where the numbers come from")
    gpus: Whole = Field(2, gt=0, description="GPUs per engine (tensor parallel size)")
    gpu_type: str = Field("B200", description="GPU model, matches a rate in configs/pricing")
    block_tokens: Whole = Field(gt=0, description="tokens of attention KV per cache block")
    blocks_per_engine: Whole = Field(
        gt=0,
        description=(
            "cache blocks of one engine (under tensor parallelism each block is split across "
            "the GPUs: 2,531 blocks on 2×B200 is the whole engine's cache, not per GPU)"
        ),
    )
    checkpoint_blocks: Whole = Field(
        gt=0, description="blocks one recurrent-state checkpoint occupies"
    )
    cache_gib_per_gpu: Number | None = Field(
        None,
        gt=0,
        description=(
            "GiB of KV cache on each GPU (its share of blocks_per_engine): turns host memory "
            "in GB into blocks (replay.sim.cache.tiers; None: no host tier on this profile)"
        ),
    )
    prefill_cost_d: Number = Field(gt=0, description="D: seconds per prefilled token (linear term)")
    prefill_cost_e: Number = Field(
        ge=0, description="E: quadratic attention term, see cost_unit_tokens"
    )
    cost_unit_tokens: Whole = Field(
        10_000,
        gt=0,
        description=(
            "positions in the E term are measured in units of this many tokens: "
            "cost(a,b) = D·(b−a) + E·((b/u)²−(a/u)²)/2 · u. The source gives D and E without units; "
            "with u = 10,000 a cold 142K prefill costs ≈ 6 s on GLM-5.3-Flash."
        ),
    )
    clock_prefill_scale: Number = Field(
        1.0,
        gt=0,
        description=(
            "engine clock: modelled prefill time = this × the restore cost above "
            "(`replay.sim.cache.cost.PrefillCost.clock_seconds`). D and E are fitted for "
            "GreedyDual-Size ranking, where "
            "only their ratio matters, so their absolute scale is not a GPU clock; this factor "
            "calibrates the emulators' and the simulator's step times to a measured prefill "
            "rate and leaves restore costs (eviction priorities) untouched. The profile YAML "
            "states its derivation."
        ),
    )
    decode_s_per_step: Number = Field(
        0.02, gt=0, description="engine clock: fixed seconds of every forward step"
    )
    decode_s_per_seq: Number = Field(
        0.0002, ge=0, description="engine clock: extra seconds per step for each decoding sequence"
    )
    chunk_tokens: Whole = Field(
        8704,
        gt=0,
        description="prefill chunk the cache policies place checkpoints by (long-prefill threshold)",
    )
    max_batched_tokens: Whole = Field(
        16384, gt=0, description="tokens one step computes, decode included (vLLM's budget)"
    )
    prefill_cap_tokens: Whole = Field(
        8704,
        gt=0,
        description="most prompt tokens one request computes per step (never token-scaled)",
    )
    max_batch: Whole = Field(256, gt=0, description="most sequences decoding at once")
    context_tokens: Whole = Field(1_048_576, gt=0, description="maximum model length")
    vocab_size: Whole = Field(
        151_552, gt=0, description="vocabulary size for synthesised token ids"
    )

    @property
    def capacity_tokens(self) -> int:
        """KV tokens the whole engine can hold."""
        return self.blocks_per_engine * self.block_tokens


def profiles_dir() -> Path:
    return config_subdir("models")


def list_profiles() -> list[str]:
    return sorted(p.stem for p in profiles_dir().glob("*.yaml"))


def load_profile(name_or_path: str | Path) -> ModelProfile:
    """A profile by name (a file in configs/models/) or by path to a YAML file."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = profiles_dir() / f"{name_or_path}.yaml"
    if not path.exists():
        known = ", ".join(list_profiles()) or "none"
        raise ProfileError(
            f"model profile '{name_or_path}' not found ({path}); known: {known}"
            + (subdir_blame("models") if path.parent == profiles_dir() else "")
        )
    data = read_yaml_mapping(path, ProfileError, "profile fields")
    data.setdefault("name", path.stem)
    try:
        return ModelProfile.model_validate(data)
    except ValidationError as e:
        raise ProfileError(f"{path}: {first_field_error(e)}") from e
