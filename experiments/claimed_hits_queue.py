"""Experiment: does the false-hit check (`analysis.claimed_hits`) accuse honest engines of
lying, and does judging only the requests that met a clear queue (its rule 0) stop it without
losing the lies? (docs/field-numbers.md, "Claimed hits checked against time".)

    .venv/bin/python experiments/claimed_hits_queue.py RUN_DIR [--lies 0.3] [--seed 0]

RUN_DIR is a run directory whose engines are honest (the built-in emulators, or a simulated
run with engine timing: neither ever reports a hit it did not use). Per engine it prints the
check with rule 0 and without it (every request fitted and judged, the rule before), on the
records as recorded and with lies planted: a seeded share `--lies` of the requests claiming
more than half their prompt cached get the full prefill's time added to their TTFT (the
prefill cost the check fits on the clear requests of the recorded run). An honest engine's
flags are false accusations; a planted lie found is a true one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.claimed_hits import PrefillCost, check_engine


def planted(d: pd.DataFrame, share: float, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """`d` with a seeded `share` of its warm requests given the full prefill's time."""
    base = check_engine(d).evidence
    if share == 0 or "prefill_s_per_token" not in base:
        return d, np.zeros(len(d), dtype=bool)
    cost = PrefillCost(base["prefill_s_per_token"], base["prefill_s_per_token_position"])
    prompt = d["prompt_tokens"].to_numpy(float)
    cached = d["cached_tokens"].fillna(0).to_numpy(float)
    ok = d["first_token_s"].notna().to_numpy()
    lies = ok & (cached > 0.5 * prompt) & (np.random.default_rng(seed).random(len(d)) < share)
    extra = np.where(lies, cost(np.zeros_like(prompt), prompt) - cost(cached, prompt), 0.0)
    out = d.copy()
    out["first_token_s"] = out["first_token_s"] + extra
    return out, lies


def row(engine: str, rule: str, d: pd.DataFrame, lies: np.ndarray, clear_only: bool) -> str:
    got = check_engine(d, clear_only=clear_only)
    assessed = got.flags["assessed"].to_numpy(bool)
    flagged = got.flags["false_hit"].to_numpy(bool)
    return (
        f"| {engine} | {rule} | {int(lies.sum())} | {int(assessed.sum())} | "
        f"{int((flagged & ~lies).sum())} | {int((assessed & lies).sum())} | "
        f"{int((flagged & lies).sum())} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--lies", type=float, default=0.3, help="share of warm requests to plant")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    path = args.run_dir / "requests.parquet"
    if not path.is_file():
        print(f"claimed_hits_queue: {path} does not exist: give a run directory", file=sys.stderr)
        return 2
    if not 0 <= args.lies <= 1:
        print(f"claimed_hits_queue: --lies {args.lies}: expected 0 to 1", file=sys.stderr)
        return 2
    records = pd.read_parquet(path)
    print("| engine | rule | lies planted | judged | honest flagged | lies judged | lies found |")
    print("|---|---|---|---|---|---|---|")
    for engine, d in records.groupby("engine", sort=True):
        for share in sorted({0.0, args.lies}):
            d2, lies = planted(d, share, args.seed)
            for clear_only, rule in ((False, "every request"), (True, "clear queue")):
                print(row(str(engine), rule, d2, lies, clear_only))
    return 0


if __name__ == "__main__":
    sys.exit(main())
