"""Which runs are alike: the Compare page joins one engine's points into a line only across
runs that differ in their load (sessions) and seed, and in nothing else that changes what a
point means.

A run's `Kind` is what must match: the executor (live, emulated, simulated with engine or trace
timing), the clock (a live run's time scale), the run's length, the measured window, the corpus
(the trace's checksum), its token scale, the simulator's model profile and how subagents were
replayed. A 48-session emulated run and a 2–16-session trace-timing simulation are two kinds:
drawn as one line they would read as a load curve, and are not one. `group` names the kinds of
a set of runs A, B, … (the most runs first); `Kind.label` says in words what each is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from analysis.manifest import manifest_token_scale
from analysis.provenance import EXECUTOR_SHORT
from analysis.registry import executor_of
from replay.rundir_models import Manifest


def minutes(seconds: float) -> str:
    """90 → "1.5", 2700 → "45": seconds as minutes, short."""
    return f"{round(seconds / 60.0, 2):g}"


def window_words(start_s: float, end_s: float) -> str:
    """ "window 15–45 min", or "whole run" when the count has no end."""
    if not math.isfinite(end_s):
        return "whole run" if start_s <= 0 else f"from {minutes(start_s)} min to the end"
    return f"window {minutes(start_s)}–{minutes(end_s)} min"


@dataclass(frozen=True)
class Kind:
    """What two runs must share for their points to be joined (see the module docstring)."""

    executor: str
    time_scale: float
    duration_s: float | None
    window: tuple[float, float] | None
    corpus: str | None  # the trace's sha256, else its path
    corpus_name: str
    token_scale: float
    model: str | None
    subagents: str | None

    def key(self) -> tuple[object, ...]:
        """Equal for alike runs (the corpus by checksum, not by its shown name)."""
        return (
            self.executor,
            self.time_scale,
            self.duration_s,
            self.window,
            self.corpus,
            self.token_scale,
            self.model,
            self.subagents,
        )

    @property
    def window_label(self) -> str:
        return "whole run" if self.window is None else window_words(*self.window)

    @property
    def executor_label(self) -> str:
        """ "simulated, trace timing", "emulated, clock ×20"."""
        words = EXECUTOR_SHORT.get(self.executor, self.executor)
        return words + (f", clock ×{self.time_scale:g}" if self.time_scale != 1 else "")

    def short(self) -> str:
        """What a legend heading has room for: "emulated · window 15–45 min"."""
        return f"{self.executor_label} · {self.window_label}"

    def label(self) -> str:
        """ "emulated, clock ×20 · 45 min run · window 15–45 min · sample.jsonl.gz ÷16"."""
        parts = [self.executor_label]
        if self.duration_s is not None:
            parts.append(f"{minutes(self.duration_s)} min run")
        parts.append(self.window_label)
        corpus = self.corpus_name
        if self.token_scale != 1:
            corpus += f" ÷{self.token_scale:g}"
        parts.append(corpus)
        if self.model:
            name = Path(self.model).name
            parts.append(f"profile {name.removesuffix('.yaml').removesuffix('.yml')}")
        if self.subagents and self.subagents != "concurrent":
            parts.append(f"subagents {self.subagents}")
        return " · ".join(parts)


def kind_of(manifest: Manifest) -> Kind:
    """The kind of the run `manifest` describes."""
    trace = manifest.trace
    path = trace.path if trace is not None else None
    sha = trace.sha256 if trace is not None else None
    scale = manifest_token_scale(manifest)
    if scale == 1.0 and trace is not None and trace.token_scale:
        scale = float(trace.token_scale)
    config = manifest.config
    executor = executor_of(manifest)
    live = executor in ("live", "emulated")
    return Kind(
        executor=executor,
        time_scale=float(config.time_scale or 1.0) if live else 1.0,
        duration_s=float(config.duration_s) if config.duration_s is not None else None,
        window=(float(config.window[0]), float(config.window[1])) if config.window else None,
        corpus=sha or path,
        corpus_name=Path(path).name if path else "unknown corpus",
        token_scale=scale,
        model=config.model,
        subagents=config.subagents,
    )


def group(kinds: Mapping[str, Kind]) -> dict[str, str]:
    """{run: its group's letter}: alike runs share one; the group with the most runs is A
    (ties: the first listed)."""
    members: dict[tuple[object, ...], list[str]] = {}
    for name, kind in kinds.items():
        members.setdefault(kind.key(), []).append(name)
    order = sorted(members.values(), key=lambda runs: -len(runs))
    return {name: _letter(i) for i, runs in enumerate(order) for name in runs}


def _letter(i: int) -> str:
    """A, B, …, Z, AA, AB, …"""
    out = ""
    i += 1
    while i:
        i, rest = divmod(i - 1, 26)
        out = chr(ord("A") + rest) + out
    return out


__all__ = ["Kind", "group", "kind_of", "minutes", "window_words"]
