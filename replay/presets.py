"""Workload presets: a peer benchmark's replay rules mapped onto ours (issue 35, point 1).

`--preset NAME` on `replay run` and `replay simulate` fills in the workload fields the user did
not give (flags and a config file win; `replay.runspec.resolve.with_preset` puts the preset's
layer between them and the command's base layer). A preset's rules are data here, each with its
source and how our replay applies it; the manifest's spec records the preset and the fields it
set (`WorkloadSpec.preset`), and the run's notes (`analysis.manifest.manifest_notes`) say which
of the peer's rules are not applied. This module imports nothing of ours: the run
specification and analysis both read it.

`agentx`: aiperf's `--scenario inferencex-agentx-mvp` (the AgentX benchmark InferenceX runs),
read in aiperf 0.13.0's own code as installed by `scripts/setup_peers.sh` (paths below are
under `aiperf/` in `.venv-peers`'s site-packages). Issue 35 quotes other values (a 3,600 s
profile, starts at 25-75%, 10 warm-up requests per lane, a 300 s trace idle cap, 1 s metric
slices, a failure threshold of 0.10); none of them is what aiperf 0.13.0's scenario sets
(`AGENTX_ISSUE_QUOTES` says what the code has instead), so the preset follows the code.
"""

from __future__ import annotations

from dataclasses import dataclass

# A gap cap no run can reach: a year of the trace's clock, the longest run the spec allows
# (replay.runspec.fields.MAX_DURATION_MIN), so every recorded gap is waited whole.
NO_GAP_CAP_S = 525_600.0 * 60


@dataclass(frozen=True)
class Rule:
    """One rule of a peer's benchmark: what it is there, where it is written, and what our
    replay does with it (`applied`: False when it has no counterpart here)."""

    name: str
    theirs: str
    source: str
    ours: str
    applied: bool


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    # WorkloadSpec fields the preset fills in when the user gave none (minutes for
    # duration_min; `window` None: the whole run, whatever its duration).
    values: dict[str, object]
    rules: tuple[Rule, ...]
    # A run shorter than this (minutes) is below the peer's floor: noted, not refused.
    min_duration_min: float | None = None

    def not_applied(self) -> list[Rule]:
        return [r for r in self.rules if not r.applied]


_SCEN = "common/scenario/inferencex_agentx_mvp.py"

AGENTX = Preset(
    name="agentx",
    title="aiperf 0.13.0 --scenario inferencex-agentx-mvp (InferenceX AgentX)",
    values={
        "duration_min": 30.0,
        "window": None,
        "gap_cap_s": NO_GAP_CAP_S,
        "start_range": (0.0, 1.0),
        "start_at": "time",
        "recycle_start": "first",
    },
    min_duration_min=15.0,
    rules=(
        Rule(
            "profile length",
            "--benchmark-duration 1,800 s when unset; at least 900 s",
            f"{_SCEN}:32-33 (applied by common/scenario/validator.py:564-607)",
            "--duration-min 30; a shorter run is noted as below the 15-minute floor",
            True,
        ),
        Rule(
            "measured phase",
            "the profiling phase: every request after the warm-up phase",
            "timing/strategies/agentic_replay.py:40-48",
            "--window 0-<duration>: the whole run, priming requests excluded as always",
            True,
        ),
        Rule(
            "trajectory start",
            "t* uniform over 0-100% of the trace's recorded time span (aiperf's own default "
            "without the scenario: 25-75%); each stream resumes at its first request at or "
            "after t*",
            f"{_SCEN}:34-35; timing/trajectory_source.py:614-621, 639-651; timing/config.py:130-145",
            "--start-range 0-1 --start-at time: the first request at or after a uniformly "
            "drawn instant of the trajectory's span",
            True,
        ),
        Rule(
            "warm-up",
            "one priming request per stream active at t* (its last request before t*), in a "
            "warm-up phase not measured; spread so every trajectory reaches t* together",
            "timing/strategies/agentic_replay.py:14-30",
            "one priming request per session (the request before the start), not measured, "
            "staggered over --warmup-s; subagents already running at the start are not "
            "primed or replayed (aiperf primes them too)",
            True,
        ),
        Rule(
            "lanes",
            "--concurrency lanes; a lane whose trajectory (and its subagents) drained takes "
            "the next trajectory from its first request",
            "timing/strategies/agentic_replay.py:48-53",
            "--sessions lanes (the preset leaves the load to you); --recycle-start first: a "
            "session's later trajectories start at their first request",
            True,
        ),
        Rule(
            "recorded gaps",
            "kept whole: a trace idle-gap cap and an inter-turn delay cap are refused",
            f"{_SCEN}:37-38; common/scenario/validator.py:696-745",
            "--gap-cap-s a year: no cap",
            True,
        ),
        Rule(
            "system idle cap",
            "when no request is in flight anywhere, pending timers shift so the idle time "
            "is at most 10 s",
            f"{_SCEN}:36; common/scenario/base.py:111-118",
            "not applied: our sessions keep their own clocks (lifting it in aiperf did not "
            "lower its request count: docs/field-numbers.md)",
            False,
        ),
        Rule(
            "same trajectory in two lanes",
            "a cache-busting prefix on each lane's first turn",
            f"{_SCEN}:39",
            "each replay of a trajectory is its own conversation (replay.workload.Assignment."
            "identity): the same effect",
            True,
        ),
        Rule(
            "output length and streaming",
            "ignore_eos forced, streaming forced, no input truncation",
            f"{_SCEN}:10-13",
            "always so: exact output lengths (ignore_eos), streamed, prompts as recorded",
            True,
        ),
        Rule(
            "failure gates",
            "a failed warm-up request aborts the run; a context-overflow rate over 1% marks "
            "the submission invalid",
            "timing/strategies/agentic_replay.py:31-38; common/environment.py:145-156",
            "not applied: errors are recorded per request and counted in the summary",
            False,
        ),
        Rule(
            "corpus",
            "a Weka-format loader (cc-traces-weka or a weka_trace folder)",
            f"{_SCEN}:14-31",
            "any trace replay reads (--trace); the comparison uses the bundled Weka sample",
            True,
        ),
    ),
)

PRESETS: dict[str, Preset] = {AGENTX.name: AGENTX}

# What issue 35 quotes for AgentX, and what aiperf 0.13.0's code has instead.
AGENTX_ISSUE_QUOTES: tuple[tuple[str, str], ...] = (
    ("3,600 s profile", f"1,800 s default, 900 s floor ({_SCEN}:32-33)"),
    (
        "trajectory starts between 25% and 75%",
        f"0-100% ({_SCEN}:34-35); 25-75% is aiperf's default without the scenario "
        "(timing/config.py:130-145)",
    ),
    (
        "10 warm-up requests per lane",
        "one priming request per stream active at t* (timing/strategies/agentic_replay.py:"
        "14-30); --warmup-request-count has no default (config/flags/cli_config.py:2426-2440)",
    ),
    (
        "300 s trace idle cap",
        f"a trace idle cap is refused ({_SCEN}:37); a 10 s system idle cap ({_SCEN}:36)",
    ),
    ("1 s metric slices", "no slices unless --slice-duration is given (config/artifacts.py:70)"),
    (
        "failure threshold 0.10",
        "context-overflow rate limit 0.01 (common/environment.py:145-156); a failed warm-up "
        "aborts (timing/strategies/agentic_replay.py:31-38)",
    ),
)


class PresetError(ValueError):
    """An unknown preset; the message names --preset and the choices."""


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise PresetError(f"--preset {name}: unknown preset; choose one of {', '.join(PRESETS)}")
    return PRESETS[name]


def preset_notes(name: str, duration_min: float | None) -> list[str]:
    """The run's notes for a preset: which rules it used, which it does not apply."""
    preset = PRESETS.get(name)
    if preset is None:
        return [f"workload preset {name}: unknown to this version"]
    notes = [f"workload preset {name}: {preset.title}, mapped in replay.presets"]
    for rule in preset.not_applied():
        notes.append(f"preset {name}: {rule.name} not applied ({rule.theirs})")
    floor = preset.min_duration_min
    if floor is not None and duration_min is not None and duration_min < floor:
        notes.append(
            f"preset {name}: a {duration_min:g}-minute run is below its {floor:g}-minute floor "
            "(scaled down; not comparable with a full AgentX run)"
        )
    return notes


__all__ = [
    "AGENTX",
    "AGENTX_ISSUE_QUOTES",
    "NO_GAP_CAP_S",
    "PRESETS",
    "Preset",
    "PresetError",
    "Rule",
    "get_preset",
    "preset_notes",
]
