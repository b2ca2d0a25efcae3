"""The replay rules: which trajectory each session replays, from where, and with what waits.

The paper's benchmark, as defaults (DESIGN.md, "Replay rules"): N concurrent sessions; each
takes a trajectory and starts it at a uniformly random request between 25% and 75% of it, the
context before that point warmed by one priming request that is not measured; between turns
a session waits the recorded tool time capped at 300 s; when a trajectory ends the session
takes the next one. A run lasts 45 minutes and measures minutes 15–45.

Everything here is a pure function of the trace and the seed, never of timing, so every
engine replayed with the same seed gets the same trajectories in the same session slots:
slot s takes positions s, s+N, s+2N, … of a seeded shuffle of the trace (reshuffled each
time the trace is exhausted), and each assignment's start point has its own seeded stream.
Executors (the simulator, the live client) drive time themselves: they ask an `Assignment`
for its `turns()` and `spawns()`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np

    from replay.traces.model import Trace, Trajectory


class WorkloadError(ValueError):
    """A workload setting that cannot work; the message names the setting, and `field` the
    `WorkloadConfig` field (which the run spec maps to its flag)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


SubagentMode = Literal["concurrent", "inline", "skip"]
# How subagents are replayed: `concurrent` (the default) as child sessions running beside
# their parent, which goes on with its own recorded gaps, as a Claude Code agent's Task tool
# runs them (the corpus records them as nested conversations with their own clock);
# `inline` in their parent's slot, the parent waiting for them before its next turn; `skip`
# not at all, as the source's own simulation replayed the corpus (its working-set ratios
# 0.93 / 1.34 are measured that way).
SUBAGENT_MODES: tuple[str, ...] = ("concurrent", "inline", "skip")

StartAt = Literal["request", "time"]
# Where a trajectory's start point is drawn: `request` (the default) a uniformly random
# request of the start range (by index); `time` the first request at or after a uniformly
# random instant of the start range of the trajectory's span (its first to its last request
# start, subagents' included), as aiperf's agentic replay draws t* (replay.presets).
START_AT: tuple[str, ...] = ("request", "time")
RecycleStart = Literal["random", "first"]
# Where a session's later trajectories start: `random` (the default) at a drawn start point,
# primed, like its first; `first` at their first request, as aiperf's lanes recycle.
RECYCLE_STARTS: tuple[str, ...] = ("random", "first")


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    """Replay settings. Times are seconds of the replayed (unscaled) clock.

    The one place the replay's defaults live (the paper's benchmark, docs/replay-rules.md):
    `replay run` (with endpoints and embedded), `replay simulate`, the simulator's `SimConfig`
    and the embedded default's loader (`replay.emulator.defaults`) all take theirs from these
    fields (`DEFAULT_WORKLOAD`) and `TIMED_WARMUP_S`; `configs/workloads/default.yaml` names
    only the embedded default's own choices (engines, trace, model, time scale, blocks)."""

    sessions: int = 48
    duration_s: float = 2700.0  # 45 minutes
    # Minutes 15-45: the last two thirds of the run (replay.windows, the paper's window).
    window: tuple[float, float] = (900.0, 2700.0)
    gap_cap_s: float = 300.0
    start_lo: float = 0.25
    start_hi: float = 0.75
    seed: int = 0
    subagents: SubagentMode = "concurrent"
    # Warm-up: session s sends its first (priming) request s·warmup_s/sessions after the
    # start, so the priming requests do not reach the engine as one cold burst at t = 0.
    warmup_s: float = 0.0
    start_at: StartAt = "request"
    recycle_start: RecycleStart = "random"

    def __post_init__(self) -> None:
        if self.sessions < 1:
            raise WorkloadError(f"sessions must be at least 1 (got {self.sessions})", "sessions")
        if not self.duration_s > 0:
            raise WorkloadError(
                f"duration must be positive (got {self.duration_s} s)", "duration_s"
            )
        a, b = self.window
        if not 0 <= a < b <= self.duration_s:
            raise WorkloadError(
                f"window {a:g}-{b:g} s must satisfy 0 ≤ start < end ≤ duration ({self.duration_s:g} s)",
                "window",
            )
        if not 0 <= self.warmup_s < self.duration_s:
            raise WorkloadError(
                f"warm-up must lie within the run: 0 ≤ {self.warmup_s:g} < {self.duration_s:g} s",
                "warmup_s",
            )
        if self.gap_cap_s < 0:
            raise WorkloadError(f"gap cap must not be negative (got {self.gap_cap_s})", "gap_cap_s")
        if not 0 <= self.start_lo <= self.start_hi <= 1:
            raise WorkloadError(
                f"start range {self.start_lo}-{self.start_hi} must satisfy 0 ≤ lo ≤ hi ≤ 1",
                "start_range",
            )
        if self.start_at not in START_AT:
            raise WorkloadError(
                f"start_at must be one of {', '.join(START_AT)} (got '{self.start_at}')",
                "start_at",
            )
        if self.recycle_start not in RECYCLE_STARTS:
            raise WorkloadError(
                f"recycle_start must be one of {', '.join(RECYCLE_STARTS)} "
                f"(got '{self.recycle_start}')",
                "recycle_start",
            )
        if self.subagents not in SUBAGENT_MODES:
            raise WorkloadError(
                f"subagents must be one of {', '.join(SUBAGENT_MODES)} (got '{self.subagents}')",
                "subagents",
            )


# The defaults every command reads (WorkloadConfig's docstring).
DEFAULT_WORKLOAD = WorkloadConfig()
# The warm-up of a timed replay (`replay run`, with endpoints or embedded, and `replay simulate
# --timing engine`): session s sends its priming request s·120/48 s after the start, so 48 cold
# priming prefills (≈ 4 s of engine time each) do not reach the engine as one burst. The plain
# workload (and trace-timed simulation) keeps WorkloadConfig's 0: no stagger.
TIMED_WARMUP_S = 120.0


@dataclass(frozen=True, slots=True)
class Turn:
    """One request to send: its index in the trajectory, the capped tool gap to wait after
    the previous request of the same trajectory completes, and whether it only primes."""

    index: int
    gap_s: float
    priming: bool = False


@dataclass(frozen=True, slots=True)
class Spawn:
    """A subagent to start `delay_s` after request `after_turn` of its parent completes
    (`after_turn == -1`: at the parent's start). It runs its whole trajectory."""

    after_turn: int
    delay_s: float
    trajectory: Trajectory


@dataclass(frozen=True, slots=True)
class Assignment:
    """Trajectory `trajectory` replayed by session `slot` as its `ordinal`-th assignment,
    measured from request `start` (a subagent assignment always has start 0).

    `reuse`: how many times the run replayed this trajectory before, counted over every
    slot's assignments in order of (ordinal, slot). Each replay is its own conversation:
    executors give every reuse its own token identity (`identity`), so no copy can hit
    cache another copy left."""

    slot: int
    ordinal: int
    trajectory: Trajectory
    start: int
    gap_cap_s: float = DEFAULT_WORKLOAD.gap_cap_s
    subagents: SubagentMode = DEFAULT_WORKLOAD.subagents
    reuse: int = 0
    delay_s: float = 0.0  # wait before the first request (the warm-up stagger)

    @property
    def identity(self) -> str:
        """The conversation's identity for token synthesis: the trajectory's hash namespace,
        with the reuse count appended for every replay after the first."""
        ns = self.trajectory.namespace
        return ns if self.reuse == 0 else f"{ns}#replay{self.reuse}"

    @property
    def first_index(self) -> int:
        """The first request sent: the priming request when there is one."""
        return max(self.start - 1, 0)

    def turns(self) -> list[Turn]:
        tr, cap = self.trajectory, self.gap_cap_s
        out: list[Turn] = []
        if self.start > 0:
            out.append(Turn(self.start - 1, self.delay_s, priming=True))
            out.append(Turn(self.start, tr.gap_before(self.start, cap)))
        else:
            out.append(Turn(0, self.delay_s))
        out.extend(Turn(i, tr.gap_before(i, cap)) for i in range(self.start + 1, tr.num_requests))
        return out

    def spawns(self) -> list[Spawn]:
        """Subagents that branch off at or after the first request this assignment sends
        (none when subagents are skipped)."""
        tr, cap = self.trajectory, self.gap_cap_s
        out: list[Spawn] = []
        if self.subagents == "skip":
            return out
        for sub in tr.subagents:
            after = sub.spawn_index - 1
            if after < 0:
                if self.start > 0:
                    continue
                delay = sub.spawn_t - (float(tr.t[0]) if tr.num_requests else 0.0)
            else:
                if after < self.first_index:
                    continue
                api = float(tr.api_time[after])
                end = float(tr.t[after]) + (0.0 if math.isnan(api) else api)
                delay = sub.spawn_t - end
            out.append(Spawn(after, min(max(delay, 0.0), cap), sub))
        out.sort(key=lambda s: (s.after_turn, s.delay_s, s.trajectory.id))
        return out

    def child(self, spawn: Spawn) -> Assignment:
        """The assignment of a spawned subagent: same slot, ordinal and reuse, whole
        trajectory."""
        return Assignment(
            self.slot,
            self.ordinal,
            spawn.trajectory,
            0,
            self.gap_cap_s,
            self.subagents,
            self.reuse,
        )


def _span(tr: Trajectory) -> tuple[float, float]:
    """The first and last request start of a trajectory and its subagents (trace clock)."""
    lo, hi = float(tr.t[0]), float(tr.t[-1])
    for sub in tr.subagents:
        if sub.num_requests:
            a, b = _span(sub)
            lo, hi = min(lo, a), max(hi, b)
    return lo, hi


def start_at_time(tr: Trajectory, u: float) -> int:
    """The first request of `tr` at or after the instant a fraction `u` through its span
    (aiperf's t*: timing/trajectory_source.py of aiperf 0.13.0); the last request when the
    instant falls after it (a start must leave a request to measure)."""
    import numpy as np

    lo, hi = _span(tr)
    t_star = lo + u * (hi - lo)
    i = int(np.searchsorted(tr.t, t_star, side="left"))
    return min(i, tr.num_requests - 1)


class Workload:
    """The seeded, engine-independent assignment of trajectories to session slots."""

    def __init__(self, trace: Trace, cfg: WorkloadConfig):
        self.cfg = cfg
        self.trajectories = [tr for tr in trace.trajectories if tr.num_requests > 0]
        if not self.trajectories:
            raise WorkloadError(f"trace {trace.source} has no trajectory with a request to replay")
        # aiperf's theoretical prefix-cache counts, computed per root trajectory when one
        # of its requests is first asked for (`prefix_blocks`).
        self._root_of = {t.id: root for root in self.trajectories for t in root.walk()}
        self._prefix: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def prefix_blocks(self, trajectory: Trajectory, index: int) -> tuple[int, int] | None:
        """aiperf's theoretical prefix-cache counts of request `index` of `trajectory`:
        (the leading hash blocks its trace had already sent, its blocks), per trace with one
        seen-set over the root and its subagents in the trace's clock
        (`replay.traces.prefix`); None for a trajectory this workload does not hold."""
        if trajectory.id not in self._prefix:
            root = self._root_of.get(trajectory.id)
            if root is None:
                return None
            from replay.traces.prefix import prefix_blocks

            self._prefix.update(prefix_blocks(root))
        hits, totals = self._prefix[trajectory.id]
        return int(hits[index]), int(totals[index])

    @cache  # noqa: B019 - one small permutation per epoch, bounded by the run's length
    def _epoch(self, epoch: int) -> np.ndarray:
        import numpy as np  # not at the top: the --help of the commands reads DEFAULT_WORKLOAD

        rng = np.random.default_rng([self.cfg.seed, 0x5EED, epoch])
        return rng.permutation(len(self.trajectories))

    def assignment(self, slot: int, ordinal: int) -> Assignment:
        """Session `slot`'s `ordinal`-th trajectory and its start point."""
        import numpy as np

        if not 0 <= slot < self.cfg.sessions:
            raise WorkloadError(f"session slot {slot} outside 0..{self.cfg.sessions - 1}")
        n_traj = len(self.trajectories)
        g = slot + ordinal * self.cfg.sessions
        tr = self.trajectories[int(self._epoch(g // n_traj)[g % n_traj])]
        rng = np.random.default_rng([self.cfg.seed, 0x57A7, slot, ordinal])
        u = rng.uniform(self.cfg.start_lo, self.cfg.start_hi)
        if ordinal > 0 and self.cfg.recycle_start == "first":
            start = 0
        elif self.cfg.start_at == "time":
            start = start_at_time(tr, u)
        else:
            start = min(math.floor(u * tr.num_requests), tr.num_requests - 1)
        # Position g of the sequence is in epoch g // n_traj, and each epoch is a permutation
        # of the trace: this trajectory was replayed once in each earlier epoch.
        reuse = g // n_traj
        delay = slot * self.cfg.warmup_s / self.cfg.sessions if ordinal == 0 else 0.0
        return Assignment(
            slot, ordinal, tr, start, self.cfg.gap_cap_s, self.cfg.subagents, reuse, delay
        )

    def reuses(self, assignments: int) -> int:
        """How many of the first `assignments` positions of the run's sequence replay a
        trajectory a second time or later (0 while the run stays within one epoch)."""
        return max(0, assignments - len(self.trajectories))

    def session_assignments(self, slot: int) -> Iterator[Assignment]:
        """An endless sequence of assignments for session `slot`."""
        ordinal = 0
        while True:
            yield self.assignment(slot, ordinal)
            ordinal += 1
