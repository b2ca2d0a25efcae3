"""Settings of one engine emulator: which engine it stands for, its model, clock and faults.

One pydantic model is the single place for the defaults. `replay serve-sim` builds it from
flags, `launch.py` hands it whole to a child process (`EmulatorConfig.child_args`), and the
server reads it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from replay.address import port_check
from replay.profiles import DEFAULT_MODEL, ModelProfile, ProfileError, load_profile
from replay.sim.cache.tiers import check_external
from replay.sim.engine.cache import EngineCache, engine_cache
from replay.sim.engine.clock import StepClock
from replay.sim.engine.scale import scaled_profile
from replay.strict_numbers import Whole
from replay.tier_limits import MAX_LINK_GBS, MAX_TIER_GB

if TYPE_CHECKING:
    from replay.sim.engine.core import Admission

# The engine each emulator stands for, and the wire protocol it speaks.
ENGINE_PROTOCOLS: dict[str, str] = {"flashstate": "openai", "vllm": "openai", "sglang": "sglang"}

# Granularity (tokens) at which the emulator hashes prompts into chained prefix keys. The
# Weka traces hash 64-token blocks; a finer unit would cost hashing time for no gain.
DEFAULT_HASH_TOKENS = 64
# A run's files hold 64-bit whole numbers (replay.runspec.fields.INT64_MAX, which this layer
# does not import: the spec is the layer above the executors).
INT64_MAX = 2**63 - 1


class FaultConfig(BaseModel):
    """Injected failures, for testing clients. All off by default."""

    # Infinity as JSON's constant: a child process reads the config back whole (`child_args`).
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")

    error_rate: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="fraction of generation requests answered with a 500",
    )
    stall_rate: float = Field(
        default=0.0, ge=0.0, le=1.0, description="fraction of streams that stop sending mid-way"
    )
    stall_s: float = Field(
        default=30.0, ge=0.0, description="how long (wall seconds) a stalled stream goes silent"
    )
    crash_after: Whole | None = Field(
        default=None, gt=0, description="the server exits hard when request crash_after+1 arrives"
    )
    # Finite: `--slow-start-s inf` answered 503 for ever (a server that never starts is no
    # fault a client can be tested against); a stall may last for ever (`stall_s`).
    slow_start_s: float = Field(
        default=0.0,
        ge=0.0,
        allow_inf_nan=False,
        description="wall seconds the server answers 503 before it is ready",
    )
    early_stop_rate: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="fraction of generations that stop at half their max tokens despite "
        "ignore_eos (an engine that ends early: replay drift)",
    )
    lie_cached_rate: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="fraction of generations that report a full prefix-cache hit while the "
        "engine model computes the whole prompt (a cached-token count only TTFT contradicts)",
    )
    seed: Whole = Field(
        default=0, description="seed of the fault draws (per request, deterministic)"
    )

    @field_validator("seed")
    @classmethod
    def _check_seed(cls, value: int) -> int:
        # numpy seeds the draws (`faults.FaultInjector`) and takes no negative seed: -1 used to
        # start, then answer every request 500 with a traceback. The run spec's seed range
        # and wording (`replay run --seed`).
        if value < 0:
            raise ValueError(f"--fault-seed {value}: must be 0 or more")
        if value > INT64_MAX:
            raise ValueError(
                f"--fault-seed {value}: must be at most {INT64_MAX} (2^63 - 1, as every seed "
                "of a run)"
            )
        return value

    @property
    def any(self) -> bool:
        return bool(
            self.error_rate
            or self.stall_rate
            or self.crash_after
            or self.slow_start_s
            or self.early_stop_rate
            or self.lie_cached_rate
        )


def model_id_problem(name: str) -> str | None:
    """Why `name` cannot be a served model id (None: it can): an empty one (`''` served the
    profile's name in silence), or one holding a space, a newline or another control
    character, which every client must send back verbatim in its requests."""
    if not name:
        return (
            "must not be empty; give the model id to serve, or leave the flag out to serve "
            "the profile's name"
        )
    bad = next((c for c in name if c.isspace() or unicodedata.category(c)[0] in "CZ"), None)
    if bad is not None:
        return (
            f"holds {bad!r}; a model id is one word (letters, digits, '-', '_', '.', '/'), "
            "e.g. glm-5.3-flash"
        )
    return None


def _model_id(name: str | None) -> str | None:
    if name is not None and (problem := model_id_problem(name)) is not None:
        raise ValueError(f"--served-model-name {name!r}: {problem}")
    return name


class EmulatorConfig(BaseModel):
    """One emulator: engine, cache policy, model profile, clock and capacity overrides."""

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")

    engine: str = Field(description="engine it stands for: flashstate, vllm or sglang")
    policy: str | None = Field(
        default=None, description="cache policy (replay.sim name); default: the engine's own"
    )
    model: str = Field(default=DEFAULT_MODEL, description="model profile name or YAML path")
    served_model_name: Annotated[str | None, AfterValidator(_model_id)] = Field(
        default=None, description="model id in /v1/models and responses; default: the profile name"
    )
    host: str = "127.0.0.1"
    # The one port check (replay.address), as `replay engines launch` and the dashboard
    # take a port.
    port: Annotated[Whole, port_check(zero_picks_free=True, named="--port ")] = Field(
        default=8000, description="0 picks a free port"
    )
    # The run spec's ranges (`replay run` refuses the same values): `replay serve-sim` and a
    # child reach only these checks, and served an infinite clock, a token scale of 1e300 or
    # a cache past 64 bits.
    time_scale: float = Field(
        default=1.0,
        gt=0.0,
        allow_inf_nan=False,
        description="10 runs the modelled engine ten times faster than real time",
    )
    token_scale: float = Field(
        default=1.0,
        ge=1.0,
        description="the trace's token lengths were divided by this: scale the profile alike",
    )
    blocks: Whole | None = Field(
        default=None,
        gt=0,
        le=INT64_MAX,
        description="the engine's cache size in blocks (default: the simulator's for the profile)",
    )
    # A host-memory tier (issue 34, replay.sim.cache.tiers) and an external store behind it
    # (rule 5), in the run spec's range (`replay.tier_limits`, as `EngineShape`'s flags): a
    # child's `--config-json` and `python -m replay.emulator`'s flags reach only this check
    # (-5 or NaN GiB used to serve, 1e308 failed as "--policy vllm: cannot convert float NaN").
    host_memory_gb: float | None = Field(
        default=None,
        ge=0,
        le=MAX_TIER_GB,
        allow_inf_nan=False,
        description="host memory (GiB) beside the GPU cache as a second tier (None or 0: none)",
    )
    host_bandwidth_gbs: float | None = Field(
        default=None,
        gt=0,
        le=MAX_LINK_GBS,
        allow_inf_nan=False,
        description="host-to-GPU bandwidth per GPU (GB/s) of loads from host memory "
        "(default: the tier's)",
    )
    external_memory_gb: float | None = Field(
        default=None,
        ge=0,
        le=MAX_TIER_GB,
        allow_inf_nan=False,
        description="external store (GiB) behind host memory, a third tier (None or 0: none)",
    )
    external_bandwidth_gbs: float | None = Field(
        default=None,
        gt=0,
        le=MAX_LINK_GBS,
        allow_inf_nan=False,
        description="bandwidth per GPU (GB/s) of loads from the external store into host "
        "memory (default: the host link's)",
    )
    external_store: str | None = Field(
        default=None, description="mooncake (KV and states; the default) or lmcache (KV only)"
    )
    block_tokens: Whole | None = Field(
        default=None, gt=0, description="tokens per cache block (overrides the profile's)"
    )
    hash_tokens: Whole = Field(
        default=DEFAULT_HASH_TOKENS, gt=0, description="prefix-key granularity"
    )
    max_batch: Whole | None = Field(
        default=None, gt=0, description="override the profile's max_batch"
    )
    tokenizer: str | None = Field(
        default=None,
        description="text endpoints' tokenizer: a Hugging Face tokenizer folder, file or hub "
        "name (needs the `tokenizers` package); default: the built-in deterministic one",
    )
    faults: FaultConfig = Field(default_factory=lambda: FaultConfig())
    replica: Whole | None = Field(
        default=None,
        ge=0,
        description="this server's index among its engine's replicas; it answers every request "
        "with an `x-replay-replica` header (None: a lone server, no header)",
    )

    @field_validator("token_scale")
    @classmethod
    def _check_token_scale(cls, value: float) -> float:
        # The run spec's check (replay.traces.scale, which loads numpy: imported only here, so
        # `replay --help` loads no heavy library: tests/unit/replay/test_cli.py).
        from replay.traces.scale import scale_problem

        problem = scale_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _check(self) -> EmulatorConfig:
        if self.engine not in ENGINE_PROTOCOLS:
            known = ", ".join(ENGINE_PROTOCOLS)
            raise ValueError(f"unknown engine '{self.engine}'; known: {known}")
        if self.external_memory_gb or self.external_store is not None:
            # A store needs its size and host memory in front of it, as `replay run` and
            # `replay simulate` refuse it (a store named alone used to be dropped in silence).
            check_external(
                self.host_memory_gb or 0.0,
                self.external_memory_gb or 0.0,
                self.external_store or "mooncake",
            )
        return self

    @property
    def protocol(self) -> str:
        return ENGINE_PROTOCOLS[self.engine]

    @property
    def policy_name(self) -> str:
        return self.policy or self.engine

    def resolved_profile(self) -> ModelProfile:
        """The model profile with this emulator's overrides applied: first scaled to the
        trace's token scale, then `block_tokens` and `max_batch` as given. (`blocks` sizes
        the cache itself: see `replay.sim.engine.cache.cache_settings`.)
        """
        profile = scaled_profile(load_profile(self.model), self.token_scale)
        update: dict[str, object] = {}
        if self.block_tokens is not None:
            update["block_tokens"] = self.block_tokens
        if self.max_batch is not None:
            update["max_batch"] = self.max_batch
        return profile.model_copy(update=update) if update else profile

    @property
    def admission(self) -> Admission:
        # The scheduler (numpy) only when asked: `replay serve-sim --help` reads this module.
        from replay.sim.engine.core import admission_for

        return admission_for(self.engine)

    def step_clock(self, profile: ModelProfile) -> StepClock:
        """The engine clock on the resolved `profile` at this emulator's token scale."""
        return StepClock(profile, self.token_scale)

    def model_id(self, profile: ModelProfile) -> str:
        return self.served_model_name or profile.name

    def child_args(self) -> list[str]:
        """The arguments that start this emulator as a child process (`python -m
        replay.emulator`): the config whole, as JSON, which the child validates back
        (`from_child_args`) instead of re-reading each setting from a flag of its own."""
        return [CHILD_CONFIG, self.model_dump_json()]


# The child process's one argument: its whole config (`EmulatorConfig.child_args`).
CHILD_CONFIG = "--config-json"


def from_child_args(args: list[str]) -> EmulatorConfig | None:
    """The config a parent handed over whole (`EmulatorConfig.child_args`); None: `args`
    are `serve-sim` flags instead."""
    if len(args) != 2 or args[0] != CHILD_CONFIG:
        return None
    return EmulatorConfig.model_validate_json(args[1])


class EmulatorConfigError(ValueError):
    """A refused emulator setting; the message starts with its `serve-sim` flag."""


# Each setting's `serve-sim` flag (FaultConfig's `seed` is --fault-seed; `blocks` the spec's
# --capacity-blocks, --blocks its older name), for refusals.
FLAG_OF: dict[str, str] = {"seed": "--fault-seed", "blocks": "--capacity-blocks (--blocks)"}


def _flag(key: str) -> str:
    return FLAG_OF.get(key, f"--{key.replace('_', '-')}")


def emulator_config(
    engine: str, *, faults: FaultConfig | Mapping[str, object] | None = None, **settings: Any
) -> EmulatorConfig:
    """The one builder of an `EmulatorConfig` (`serve-sim`'s flags, the embedded default's
    emulators, `launch.emulator_configs`): the model's own defaults for what is not given, the
    profile loaded now (a bad --model fails here, not at the first request), and a refused
    value named by its flag from pydantic's error location."""
    try:
        fc = faults if isinstance(faults, FaultConfig) else FaultConfig.model_validate(faults or {})
        given = {k: v for k, v in settings.items() if v is not None}
        cfg = EmulatorConfig(engine=engine, faults=fc, **given)
        cfg.resolved_profile()
    except ValidationError as e:
        err = e.errors()[0]
        msg = str(err["msg"]).removeprefix("Value error, ")
        if msg.startswith("--"):  # the config's own check names its flag (and the value)
            raise EmulatorConfigError(msg) from None
        key = str(err["loc"][0]) if err["loc"] else "engine"
        raise EmulatorConfigError(f"{_flag(key)}: {msg}") from None
    except ProfileError as e:
        raise EmulatorConfigError(f"--model: {e}") from None
    return cfg


def make_cache(cfg: EmulatorConfig, profile: ModelProfile) -> EngineCache:
    """The cache for `cfg.policy_name` on the emulator's (scaled) profile, with its host tier
    if `cfg.host_memory_gb` (as the simulator's: hits from host memory are cached tokens).
    Raises ValueError (`TierError` for the tier, naming its flag) where it cannot be built."""
    return engine_cache(
        cfg.policy_name, profile, cfg.token_scale, cfg.blocks,
        cfg.host_memory_gb or 0.0, cfg.host_bandwidth_gbs,
        cfg.model_dump(include={"external_memory_gb", "external_bandwidth_gbs",
                                "external_store"}),
    )  # fmt: skip
