"""What an emulator answers at `/get_server_info`: one model the emulator serialises and the
client parses (`replay.engines.preflight`), neutral ground for both (the client never imports
the emulator, the emulator never imports the client: tests/unit/test_import_graph.py).

Only our own emulators answer with this shape (`"emulator": true`); a real vLLM or SGLang
server's info is its own and is kept as it came (`parse_server_info` returns None for it). The
cache's size has one name, `engine_model.capacity_blocks`, beside where it came from
(`replay.sim.cache.capacity.Capacity`): the manifest's `capacity_blocks` and
`requested_capacity_blocks` mean the same.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class EngineModelInfo(BaseModel):
    """The engine model an emulator runs (`replay.sim.engine.core`): its clock (`StepClock.
    describe`, real-token units), its cache's capacity and its admission. The run's manifest
    keeps it as each engine's `engine_model`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token_scale: float = Field(ge=1.0)
    step_s: float
    decode_s_per_seq: float
    clock_prefill_scale: float
    prefill_cost_d: float
    prefill_cost_e: float
    max_batched_tokens: int
    prefill_cap_tokens: int
    capacity_blocks: int | None = Field(
        description="blocks the cache holds, state pool included (null: unbounded)"
    )
    requested_capacity_blocks: int | None = Field(description="the --blocks given (null: none)")
    capacity_source: Literal["profile", "override", "options", "unbounded"]
    capacity_reason: str = Field(description="where the block count came from, in words")
    state_slots: int | None = Field(default=None, description="SGLang's state pool (else null)")
    kv_tokens: int | None = Field(default=None, description="SGLang's KV pool (else null)")
    admission: str
    policy: str


class ServerInfo(BaseModel):
    """An emulator's `/get_server_info` answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str
    emulator: Literal[True] = True
    engine: str
    policy: str
    model_profile: str
    served_model_name: str
    time_scale: float = Field(gt=0)
    token_scale: float = Field(ge=1.0)
    block_tokens: int
    chunk_tokens: int
    max_running_requests: int
    context_length: int
    tokenizer: str
    replica: int | None = Field(default=None, description="index among its engine's replicas")
    engine_model: EngineModelInfo

    def flat(self) -> dict[str, Any]:
        """The scalar settings (the manifest's `flags`) and the engine model as a dict."""
        out = self.model_dump(exclude={"engine_model"}, exclude_none=True)
        out["engine_model"] = self.engine_model.model_dump()
        return out


class ServerInfoError(ValueError):
    """An answer that says it is ours but does not have our shape (an emulator of another
    version of this harness); the message names the first field."""


def parse_server_info(data: object) -> ServerInfo | None:
    """Ours (an object with `"emulator": true`) parsed strictly; None for anything else (a
    real server's info, read as it is). Raises `ServerInfoError` for ours malformed."""
    if not isinstance(data, dict) or data.get("emulator") is not True:
        return None
    try:
        return ServerInfo.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(the object)"
        raise ServerInfoError(
            f"/get_server_info says it is an emulator but its field {where}: {err['msg']} "
            f"({len(e.errors())} problem(s) in all)"
        ) from e
