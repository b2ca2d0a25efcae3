"""The embedded default: what `replay run` with engines but no endpoints replays, and how.

Its own choices (engines, trace, model, time scale, blocks) live in
`configs/workloads/default.yaml` (documented there), and only there; the workload it replays
(sessions, duration, window, warm-up, seed) is `replay.workload`'s defaults unless that file
names a value. The bundled sample
trace has its token lengths divided by `token_scale` so a laptop can replay it; the engine
model runs it at full-size cost (`replay.sim.engine.scale`, `replay.sim.engine.clock`), so the 48-session
working-set pressure and step times of the paper's demo are reproduced. The trace declares
its own scale (`replay.traces.scale`); the default's file may only agree with it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replay.config_paths import config_subdir, read_yaml_mapping, shipped_config_subdir
from replay.emulator.config import EmulatorConfig, emulator_config
from replay.field_errors import first_field_error
from replay.strict_numbers import Number, Whole
from replay.workload import DEFAULT_WORKLOAD, TIMED_WARMUP_S

_W = DEFAULT_WORKLOAD


class DefaultRunError(ValueError):
    """A malformed default-run file; the message names the file and field."""


class DefaultRun(BaseModel):
    """The embedded default's settings (`configs/workloads/default.yaml`): its own choices,
    which the file must name, and the workload, which defaults to `replay.workload`'s."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engines: list[str] = Field(description="one emulator per engine")
    trace: str = Field(description="'sample': the bundled sample trace")
    model: str = Field(description="model profile of every emulator")
    # The trace's own token_scale (replay.traces.scale) is the source of truth; a value here
    # must agree with it (None: say nothing).
    token_scale: Number | None = Field(
        default=None, ge=1.0, description="must match the trace's declared token_scale"
    )
    blocks: Whole | None = Field(default=None, gt=0, description="cache blocks per engine")
    time_scale: Number = Field(gt=0, description="emulators and tool gaps run this much faster")
    # The workload: replay.workload's defaults unless the file names a value.
    sessions: Whole = Field(default=_W.sessions, gt=0)
    duration_min: Number = Field(default=_W.duration_s / 60, gt=0)
    window: tuple[float, float] = Field(
        default=(_W.window[0] / 60, _W.window[1] / 60), description="minutes"
    )
    warmup_s: Number = Field(
        default=TIMED_WARMUP_S,
        ge=0,
        description="the sessions' first requests are spread over this",
    )
    seed: Whole = _W.seed

    def emulator_configs(self, token_scale: float | None = None) -> list[EmulatorConfig]:
        """One emulator per engine, each with its own policy, on a free loopback port, for
        a trace of `token_scale` (None: this file's value, else the bundled sample's)."""
        scale = token_scale or self.token_scale or sample_token_scale()
        return embedded_emulator_configs(self.engines, self.time_scale, True, self, scale)


def sample_token_scale() -> float:
    """The bundled sample's declared token scale (its first line's `token_scale`; 1 if none)."""
    import gzip

    import orjson

    from replay.traces import sample_path

    with gzip.open(sample_path(), "rb") as fh:
        head = orjson.loads(fh.readline())
    value = head.get("token_scale") if isinstance(head, dict) else None
    return float(value) if isinstance(value, int | float) else 1.0


def default_run_path() -> Path:
    return config_subdir("workloads") / "default.yaml"


def load_default_run(path: Path | None = None) -> DefaultRun:
    """The embedded default's settings (the workload's defaults where the file is silent).
    No such file (a REPLAY_CONFIG_DIR without one): the file shipped with the project."""
    path = path or default_run_path()
    if not path.exists():
        path = shipped_config_subdir("workloads") / "default.yaml"
    data = read_yaml_mapping(path, DefaultRunError, "settings")
    try:
        return DefaultRun.model_validate(data)
    except ValidationError as e:
        raise DefaultRunError(f"{path}: {first_field_error(e)}") from e


def embedded_emulator_configs(
    engines: list[str],
    time_scale: float,
    sample: bool,
    settings: DefaultRun | None = None,
    token_scale: float = 1.0,
) -> list[EmulatorConfig]:
    """The emulators `replay run` starts when no endpoint is given: one per engine with its
    own policy and the default's model, scaled by the replayed trace's `token_scale`.
    Replaying the bundled sample (`sample=True`) they take the default's block count."""
    d = settings or load_default_run()
    blocks = d.blocks if sample else None
    return [
        emulator_config(
            e, model=d.model, port=0, time_scale=time_scale, token_scale=token_scale, blocks=blocks
        )
        for e in engines
    ]


SAMPLE_TRACE = "sample"


def is_sample_trace(trace: str) -> bool:
    """Whether `trace` names the bundled sample (by its name or its file's path)."""
    if trace == SAMPLE_TRACE:
        return True
    from replay.traces import sample_path

    try:
        return Path(trace).resolve() == sample_path().resolve()
    except OSError:
        return False
