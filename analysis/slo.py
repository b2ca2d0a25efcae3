"""Service-level objectives for agent traffic, and goodput: what met them.

Request level (each threshold optional; a request meets the SLO when it meets all set):
TTFT from the scheduled time (``ttft_s``), end-to-end from the scheduled time (``e2e_s``)
and the mean inter-token latency, (done − first token) ÷ (output − 1), per full-size token
in a token-scaled run (``itl_s``). Task
level: the task's slowdown against the trace's own duration (``task_slowdown``; see
`analysis.tasks`). aiperf reports goodput against per-request SLOs; an agent's user waits
for the whole task, so the task SLO is reported beside it.

Goodput: output tokens per minute per GPU, counted as `output_tokens_per_min_per_gpu` is
(spread from first token to end, the part inside the window, at full size) but only for
requests that met the request SLO; `goodput_prefill_tokens_per_min_per_gpu` likewise for
prompt tokens. Pricing them gives profit at goodput.

Defaults (stated in the manifest of every live run as ``config.slo``): TTFT ≤ 6 s and
inter-token ≤ 0.175 s, the latency bounds of MLPerf Inference's long-context (Llama 3.1
405B) server scenario; no end-to-end bound (agent outputs range from one token to
thousands); a task may take at most twice as long as it did when recorded (slowdown ≤ 2).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replay.field_errors import first_field_error
from replay.rundir_models import Manifest

SLO_KEYS = {"ttft": "ttft_s", "e2e": "e2e_s", "itl": "itl_s", "slowdown": "task_slowdown"}


class SloError(ValueError):
    """A bad --slo value or config key; the message names it and shows the form."""


class Slo(BaseModel):
    """Thresholds; None leaves that one out."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # `ttft=inf` is no bound

    ttft_s: float | None = Field(default=6.0, gt=0, description="TTFT from scheduled, seconds")
    e2e_s: float | None = Field(default=None, gt=0, description="end-to-end from scheduled, s")
    itl_s: float | None = Field(default=0.175, gt=0, description="mean inter-token latency, s")
    task_slowdown: float | None = Field(
        default=2.0, gt=0, description="task latency ÷ the trace's own duration"
    )

    def text(self) -> str:
        parts = [
            f"{k}≤{v:g}" + ("" if k == "slowdown" else " s")
            for k, field in SLO_KEYS.items()
            if (v := getattr(self, field)) is not None
        ]
        return ", ".join(parts) or "none"


def parse_slo(text: str, base: Slo | None = None, where: str = "--slo") -> Slo:
    """`ttft=6,itl=0.175,e2e=none,slowdown=2` over `base` (default: the defaults)."""
    values: dict[str, Any] = (base or Slo()).model_dump()
    seen: set[str] = set()
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        key, sep, raw = item.partition("=")
        key = key.strip().lower()
        if not sep or key not in SLO_KEYS:
            raise SloError(
                f"{where} '{text}': expected KEY=VALUE with KEY one of "
                f"{', '.join(SLO_KEYS)} (e.g. ttft=6,itl=0.175,slowdown=2; 'none' drops one)"
            )
        if key in seen:  # the last used to win in silence
            raise SloError(f"{where} '{text}': {key} is given twice; give each bound once")
        seen.add(key)
        raw = raw.strip().lower().removesuffix("s") if key != "slowdown" else raw.strip()
        if raw.lower() in ("none", "off", ""):
            values[SLO_KEYS[key]] = None
            continue
        try:
            value = float(raw)
        except ValueError:
            raise SloError(f"{where} '{text}': {key} must be a number or none") from None
        if not math.isfinite(value):  # inf (or 1e400) is no bound: 'none' drops one
            raise SloError(f"{where} '{text}': {key} must be a finite number, or none")
        values[SLO_KEYS[key]] = value
    return slo_from_dict(values, where)


def slo_from_dict(data: Any, where: str = "slo") -> Slo:
    if data is None:
        return Slo()
    try:
        return Slo.model_validate(data)
    except ValidationError as e:
        raise SloError(f"{where}: {first_field_error(e)}") from None


def manifest_slo(manifest: Manifest) -> tuple[Slo, str]:
    """The run's SLO (``config.slo``) and where it came from; defaults when absent or bad."""
    raw = manifest.config.slo
    if raw is None:
        return Slo(), "defaults"
    try:
        return slo_from_dict(raw), "manifest"
    except SloError:
        return Slo(), "defaults (the manifest's config.slo is malformed)"


def request_within(
    slo: Slo,
    scheduled: np.ndarray,
    first: np.ndarray,
    done: np.ndarray,
    output: np.ndarray,
    token_scale: float = 1.0,
) -> np.ndarray:
    """Per request: met every request-level threshold set (False where a time is missing).

    `token_scale`: the trace's token lengths were divided by this (the manifest's
    `config.token_scale`), so each recorded output token stands for `token_scale` full-size
    ones and its interval for as many of the modelled engine's decode steps; the
    inter-token latency the threshold speaks of is per full-size token."""
    ok = np.isfinite(first) & np.isfinite(done)
    with np.errstate(invalid="ignore", divide="ignore"):
        if slo.ttft_s is not None:
            ok &= (first - scheduled) <= slo.ttft_s
        if slo.e2e_s is not None:
            ok &= (done - scheduled) <= slo.e2e_s
        if slo.itl_s is not None:
            per = np.maximum(output - 1, 1) * token_scale
            itl = np.where(output > 1, (done - first) / per, 0.0)
            ok &= itl <= slo.itl_s
    return ok


def share(mask: np.ndarray) -> float:
    return float(mask.mean()) if len(mask) else math.nan


__all__ = [
    "SLO_KEYS",
    "Slo",
    "SloError",
    "manifest_slo",
    "parse_slo",
    "request_within",
    "share",
    "slo_from_dict",
]
