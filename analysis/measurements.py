"""Which runs of one configuration and seed are one measurement, and what a sweep's ± spans.

A simulated run is deterministic: the same configuration and seed give the same result, so a
second run of a seed (made twice, or a copy of the directory) is one measurement, counted
once. A live or emulated run measures a real engine (or an emulator on the wall clock): run
again on the same seed it is a second measurement, and only a copy of its directory (which
keeps its run id and start time) is the same one. `measurement_id` says which a run is;
`one_per_measurement` keeps one row per measurement; `spread` says what a group's standard
error spans (distinct seeds, repeats of one seed, both: "3 seeds × 2 repeats"), and
`repeated_seeds` writes the report's note for each seed that more than one directory holds.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from analysis.registry import executor_of
from replay.rundir_models import Manifest

LIVE = frozenset({"live", "emulated"})


def measurement_id(manifest: Manifest) -> str | None:
    """What sets a live or emulated run apart from another of its configuration and seed: its
    run id and start time, which a copy of its directory keeps and a rerun does not. None for
    a simulated run (its seed is its measurement) and for a live one that records no run id
    (a rerun cannot be told from a copy, so its seed is counted once, as a simulated run's)."""
    if executor_of(manifest) not in LIVE or not manifest.run_id:
        return None
    return f"{manifest.run_id}@{manifest.start}" if manifest.start else manifest.run_id


def _subset(rows: pd.DataFrame) -> list[str]:
    return ["seed", "measurement"] if "measurement" in rows.columns else ["seed"]


def one_per_measurement(group: pd.DataFrame) -> pd.DataFrame:
    """The runs of one configuration, one per measurement (`measurement_id`): a seed held
    twice is counted once unless its runs are live reruns (distinct run ids). Runs that record
    no seed are kept."""
    if "seed" not in group.columns:
        return group
    known = group["seed"].notna()
    return pd.concat([group[known].drop_duplicates(subset=_subset(group)), group[~known]])


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def spread(group: pd.DataFrame) -> tuple[str, str]:
    """(source, words) for a group's runs, one per measurement: what its ± spans. `source`:
    "time bins" (one run: its own time-bin error), "seeds" (distinct seeds), "repeats" (one
    seed measured again: run-to-run noise, not a spread over seeds) or "seeds × repeats";
    `words`: "2 seeds", "1 seed × 2 repeats", "3 seeds × 2 repeats", "2 seeds × 1–2 repeats".
    A run that records no seed counts as a seed of its own (and the words say so)."""
    seeds = group["seed"] if "seed" in group.columns else pd.Series([None] * len(group))
    unknown = int(seeds.isna().sum())
    counts = [*Counter(seeds.dropna()).values(), *[1] * unknown]
    if not counts:
        return "time bins", "no runs"
    most, least = max(counts), min(counts)
    if len(counts) < 2 and most < 2:
        source = "time bins"
    elif most == 1:
        source = "seeds"
    else:
        source = "repeats" if len(counts) == 1 else "seeds × repeats"
    words = _plural(len(counts), "seed")
    if most > 1:
        words += f" × {most if least == most else f'{least}–{most}'} repeats"
    if unknown:
        words += f" ({unknown} without a recorded seed)"
    return source, words


def _note(dirs: list[str], seed: int, measurements: list[str | None], live: bool) -> str | None:
    """The note for one configuration and seed that `dirs` hold (`measurements`: each one's
    `measurement_id`, in order); None when there is nothing to say."""
    copies: dict[str | None, list[str]] = {}
    for d, m in zip(dirs, measurements, strict=True):
        copies.setdefault(m, []).append(d)
    same = f"the same configuration and seed ({seed})"
    notes = []
    if len(copies) > 1:
        notes.append(
            f"{', '.join(dirs)}: {same} measured {len(copies)} times (live runs with distinct "
            "run ids), each counted: their ± is run-to-run noise (repeats), not a spread "
            "over seeds"
        )
    for m, held in copies.items():
        if len(held) < 2:
            continue
        if m is not None:
            why = "copies of one live run, with its run id and start"
        elif live:
            why = "live runs that record no run id, so a rerun cannot be told from a copy"
        else:
            why = "a simulation, which is deterministic: the same seed, the same result"
        notes.append(
            f"{', '.join(held)}: {same}: one measurement repeated ({why}), counted once "
            "across seeds; give runs of other seeds to average"
        )
    return "; ".join(notes) or None


def repeated_seeds(rows: pd.DataFrame) -> list[str]:
    """A note for each configuration and seed that more than one run directory holds (one
    engine's rows suffice): copies and simulated repeats counted once, live reruns each
    counted as a repeat."""
    if rows.empty or not {"config", "seed", "run_dir"} <= set(rows.columns):
        return []
    out = []
    for _, group in rows.groupby(["config", "seed"], sort=False):
        first = group.drop_duplicates(subset=["run_dir"])
        if len(first) < 2:
            continue
        ids = first["measurement"] if "measurement" in first.columns else [None] * len(first)
        executor = first["executor"] if "executor" in first.columns else [None] * len(first)
        note = _note(
            [str(d) for d in first["run_dir"]],
            int(first["seed"].iloc[0]),
            [None if pd.isna(m) else str(m) for m in ids],
            any(e in LIVE for e in executor),
        )
        if note:
            out.append(note)
    return out


__all__ = ["measurement_id", "one_per_measurement", "repeated_seeds", "spread"]
