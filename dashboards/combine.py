"""Side by side across run directories: runs of the same workload by different engines.

`replay run` writes every engine of a comparison into one run directory, but `replay simulate`
writes one directory per policy (`flashstate-s8-seed0`, `vllm-s8-seed0`, ...). Those are the
same replay (same trace, sessions, seed and window; the workload's assignment of trajectories
to sessions is engine-independent), so the Replay, Pricing and Sessions pages may show them as
one run with several engines. `companions` finds such siblings; `combine` stacks them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from analysis.manifest import manifest_engines, manifest_seed, manifest_sessions, manifest_trace
from analysis.runs import Run, RunDirError
from replay.rundir import read_manifest
from replay.rundir_models import EngineSummary, Manifest, RunSummary


def workload_key(manifest: Manifest) -> tuple[Any, ...] | None:
    """What makes two runs the same replay: sessions, seed, trace checksum and window.
    None when the manifest does not say enough to tell."""
    sessions = manifest_sessions(manifest)
    seed = manifest_seed(manifest)
    _, sha = manifest_trace(manifest)
    if sessions is None or seed is None or sha is None:
        return None
    return (sessions, seed, sha, repr(manifest.config.window))


def _manifest(path: Path) -> Manifest | None:
    try:
        return read_manifest(path)
    except RunDirError:
        return None


def companions(root: Path, name: str, names: list[str]) -> list[str]:
    """Other runs in the same folder as `name` that replayed the same workload with other
    engines (disjoint engine names), in listing order. Unreadable manifests are skipped."""
    mine = _manifest(root / name)
    key = workload_key(mine) if mine is not None else None
    if mine is None or key is None:
        return []
    engines = set(manifest_engines(mine))
    parent = Path(name).parent
    found: list[str] = []
    for other in names:
        if other == name or Path(other).parent != parent:
            continue
        theirs = _manifest(root / other)
        if theirs is None or workload_key(theirs) != key:
            continue
        their_engines = set(manifest_engines(theirs))
        if their_engines and not their_engines & engines:
            found.append(other)
            engines |= their_engines
    return found


def combine(runs: list[Run]) -> Run:
    """One run holding every member's engines: requests stacked, manifest engines joined,
    per-engine summary entries merged. The first member gives the window and the rest of the
    manifest; its `dashboard_members` lists the member directories (in memory only)."""
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    manifest = first.manifest.model_copy(
        deep=True,
        update={
            "engines": [e for r in runs for e in r.manifest.engines],
            "run_id": " + ".join(r.run_id for r in runs),
            "dashboard_members": [str(r.path) for r in runs],
        },
    )
    summary_engines: dict[str, EngineSummary] = {}
    for r in runs:
        if r.summary is not None:
            summary_engines.update(r.summary.engines)
    metrics = [r.server_metrics for r in runs if r.server_metrics is not None]
    return Run(
        path=first.path,
        manifest=manifest,
        requests=pd.concat([r.requests for r in runs], ignore_index=True),
        summary=RunSummary(engines=summary_engines) if summary_engines else None,
        server_metrics=pd.concat(metrics, ignore_index=True) if metrics else None,
        notes=[n for r in runs for n in r.notes],
    )
