"""The Sessions page's tables: one replay session slot, turn by turn.

A session slot runs trajectories one after another (and their subagents beside them); the
drill-down lists its measured requests in the order they were scheduled, with analysis'
definitions: TTFT from the scheduled time, redundant tokens = ideal − actual resume position.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from analysis.metrics import engine_data, redundant_tokens
from analysis.runs import Run

TURN_COLUMNS = (
    "label",
    "trajectory",
    "agent",
    "turn",
    "scheduled_s",
    "tool_gap_s",
    "prompt_tokens",
    "cached_tokens",
    "ideal_cached_tokens",
    "redundant_tokens",
    "computed_tokens",
    "ttft_s",
    "e2e_s",
    "output_tokens",
    "status",
)


OVERVIEW_COLUMNS = (
    "session",
    "requests",
    "completed",
    "cancelled",
    "trajectories",
    "prompt_tokens",
    "cached_tokens",
    "hit_rate",
)


def session_overview(requests: pd.DataFrame, engine: str) -> pd.DataFrame:
    """One row per session slot of `engine` over the whole run (priming requests left out):
    requests, how many completed and how many were cancelled at the run's end, trajectories,
    prompt tokens, and the hit rate over the completed requests whose cached count is known
    (as analysis counts it), so a user can pick an interesting one."""
    rows = requests[requests["engine"] == engine]
    rows = rows[~rows["priming"].fillna(False).astype(bool)]
    if rows.empty:
        return pd.DataFrame(columns=list(OVERVIEW_COLUMNS))
    prompt = pd.to_numeric(rows["prompt_tokens"], errors="coerce")
    cached = pd.to_numeric(rows["cached_tokens"], errors="coerce")
    status = _statuses(rows)
    ok = status == "ok"
    known = cached.notna() & ok
    frame = pd.DataFrame(
        {
            "session": rows["session"].to_numpy(),
            "trajectory": rows["trajectory"].astype(str).to_numpy(),
            "prompt": prompt.to_numpy(),
            "completed": ok.to_numpy(),
            "cancelled": (status == "cancelled").to_numpy(),
            "cached": cached.where(known).to_numpy(),
            "prompt_known": prompt.where(known).to_numpy(),
        }
    )
    out = frame.groupby("session").agg(
        requests=("prompt", "size"),
        completed=("completed", "sum"),
        cancelled=("cancelled", "sum"),
        trajectories=("trajectory", "nunique"),
        prompt_tokens=("prompt", "sum"),
        cached_tokens=("cached", "sum"),
        prompt_known=("prompt_known", "sum"),
    )
    out["hit_rate"] = out["cached_tokens"] / out["prompt_known"].where(out["prompt_known"] > 0)
    return out.reset_index()[list(OVERVIEW_COLUMNS)]


def _statuses(rows: pd.DataFrame) -> pd.Series:
    """Each row's status (`ok` where none is recorded, as analysis reads it)."""
    if "status" not in rows.columns:
        return pd.Series("ok", index=rows.index)
    return rows["status"].fillna("ok").astype(str)


def hit_rate_of(turns: pd.DataFrame) -> float:
    """Cached ÷ prompt tokens over the completed (`ok`) turns whose cached count is known, as
    analysis counts the hit rate; NaN when there are none."""
    known = turns["cached_tokens"].notna() & (_statuses(turns) == "ok")
    prompt = float(pd.to_numeric(turns.loc[known, "prompt_tokens"]).sum())
    cached = float(pd.to_numeric(turns.loc[known, "cached_tokens"]).sum())
    return cached / prompt if prompt > 0 else float("nan")


def session_turns(run: Run, engine: str, session: int) -> pd.DataFrame:
    """The measured requests of one session slot of `engine`, in scheduled order, with
    `TURN_COLUMNS`. Empty (with the columns) when the slot has none."""
    req = run.requests
    mask = (req["engine"] == engine) & (pd.to_numeric(req["session"], errors="coerce") == session)
    rows = req[mask.to_numpy()].sort_values("scheduled_s", kind="stable")
    if rows.empty:
        return pd.DataFrame(columns=list(TURN_COLUMNS))
    # analysis' engine data over just these rows: the same priming filter and definitions.
    data = engine_data(dataclasses.replace(run, requests=rows), engine)
    measured = rows[~rows["priming"].fillna(False).astype(bool)]
    redundant, _ = redundant_tokens(data, np.ones(len(measured), dtype=bool))
    cached = np.nan_to_num(data.cached)
    out = pd.DataFrame(
        {
            "trajectory": measured["trajectory"].astype(str).to_numpy(),
            "agent": measured["agent"].fillna("main").astype(str).to_numpy(),
            "turn": data.turn.astype(int),
            "scheduled_s": data.scheduled,
            "tool_gap_s": data.tool_gap,
            "prompt_tokens": data.prompt,
            "cached_tokens": data.cached,
            "ideal_cached_tokens": data.ideal,
            "redundant_tokens": redundant,
            # What no cache could have saved: the prompt beyond the ideal resume position.
            "computed_tokens": np.clip(data.prompt - cached - redundant, 0.0, None),
            "ttft_s": data.first - data.scheduled,
            "e2e_s": data.done - data.scheduled,
            "output_tokens": data.output,
            "status": data.status,
        }
    )
    short = out["trajectory"].str.slice(0, 8)
    sub = np.where(out["agent"] == "main", "", "·" + out["agent"].str.slice(0, 6))
    # Numbered, so a retried turn (same trajectory, agent and index) gets its own bar.
    order = pd.Series(np.arange(1, len(out) + 1), dtype=str)
    out.insert(0, "label", order + ". " + short + sub + "#" + out["turn"].astype(str))
    return out[list(TURN_COLUMNS)].reset_index(drop=True)
