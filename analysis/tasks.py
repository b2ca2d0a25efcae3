"""Agent tasks: the unit a user feels. One task is one trajectory a session replayed (its
main agent and the subagents it spawned), from its first measured request to its last
response.

Per task: `start_s` (the first non-priming request's *scheduled* time, so queueing before
the send counts), `end_s` (the last response of any of its agents), `latency_s`, the main
chain's live duration and the trace's own duration of the same requests with the tool gaps
held equal (Σ the trace's `api_time` + Σ the capped gaps the session waited), `slowdown`
(live ÷ trace; 1 means the engine served the task as fast as the recorded one),
`requests`, `prompt_tokens`, `cached_tokens`, `output_tokens` (the replayed part; the
priming request stands in for the context before it and is left out) and `finished` (the
session moved on to its next trajectory after the task's last request succeeded, as in
`analysis.metrics.finish_times`). A task belongs to the window when it finished inside it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.manifest import Window

TASK_COLUMNS = (
    "session",
    "trajectory",
    "start_s",
    "end_s",
    "latency_s",
    "live_chain_s",
    "trace_chain_s",
    "slowdown",
    "requests",
    "prompt_tokens",
    "cached_tokens",
    "output_tokens",
    "finished",
)


def _num(df: pd.DataFrame, col: str) -> pd.Series:
    return pd.to_numeric(df[col], errors="coerce").astype(float)


def task_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per task of one engine's records (all rows, priming included); `TASK_COLUMNS`."""
    if df.empty:
        return pd.DataFrame(columns=list(TASK_COLUMNS))
    df = df.assign(
        _sched=_num(df, "scheduled_s"),
        _agent=df["agent"].fillna("main").astype(str),
        _priming=df["priming"].fillna(False).astype(bool),
    )
    main = df[df["_agent"] == "main"].sort_values(["session", "_sched"], kind="stable")
    if main.empty:
        return pd.DataFrame(columns=list(TASK_COLUMNS))
    traj = main["trajectory"].astype(str).to_numpy()
    sess = main["session"].to_numpy()
    new = np.ones(len(main), dtype=bool)
    new[1:] = (traj[1:] != traj[:-1]) | (sess[1:] != sess[:-1])
    main = main.assign(_task=np.cumsum(new))
    # Subagents belong to the task their session was running when they were scheduled.
    subs = df[df["_agent"] != "main"]
    if not subs.empty:
        keys = main[["session", "_sched", "_task"]].sort_values("_sched", kind="stable")
        subs = pd.merge_asof(
            subs.sort_values("_sched", kind="stable"),
            keys,
            on="_sched",
            by="session",
            direction="backward",
        ).dropna(subset=["_task"])
        subs["_task"] = subs["_task"].astype(int)
    rows = pd.concat([main, subs], ignore_index=True) if not subs.empty else main
    measured = rows[~rows["_priming"]]
    ok = measured[measured["status"].fillna("ok") == "ok"]
    g_ok = ok.groupby("_task")
    tokens = pd.DataFrame(
        {
            "prompt_tokens": g_ok["prompt_tokens"].sum(),
            "cached_tokens": _num(ok, "cached_tokens").fillna(0).groupby(ok["_task"]).sum(),
            "output_tokens": g_ok["output_tokens"].sum(),
        }
    )
    m_main = main[~main["_priming"]]
    # The final attempt of each turn stands for it on the trace side.
    final = m_main.sort_values("attempt", kind="stable").drop_duplicates(
        ["_task", "turn"], keep="last"
    )
    first_turn = final.groupby("_task")["turn"].transform("min")
    gaps = _num(final, "tool_gap_s").where(final["turn"] != first_turn, 0.0)
    trace_lat = _num(final, "trace_latency_s")
    known = trace_lat.notna().groupby(final["_task"]).all()
    trace_chain = (trace_lat.fillna(0) + gaps.fillna(0)).groupby(final["_task"]).sum()
    trace_chain = trace_chain.where(known)
    start = m_main.groupby("_task")["_sched"].min()
    chain_end = _num(m_main, "done_s").groupby(m_main["_task"]).max()
    end = _num(measured, "done_s").groupby(measured["_task"]).max()
    requests = measured.groupby("_task").size()
    # Finished: not the session's last task (still running at the end), last request ok.
    last_rows = main.groupby("_task").tail(1)
    status_ok = last_rows.set_index("_task")["status"].fillna("ok") == "ok"
    session_last = main.groupby("session")["_task"].max()
    finished = status_ok & ~status_ok.index.isin(session_last.to_numpy())
    first_rows = main.groupby("_task").head(1).set_index("_task")
    out = pd.DataFrame(
        {
            "session": first_rows["session"],
            "trajectory": first_rows["trajectory"].astype(str),
            "start_s": start,
            "end_s": end,
            "live_chain_s": chain_end - start,
            "trace_chain_s": trace_chain,
            "requests": requests,
        }
    )
    out = out.join(tokens)
    out["latency_s"] = out["end_s"] - out["start_s"]
    tc = out["trace_chain_s"]
    out["slowdown"] = (out["live_chain_s"] / tc).where(tc > 0)
    out["finished"] = finished.reindex(out.index).fillna(False).astype(bool)
    for col in ("requests", "prompt_tokens", "cached_tokens", "output_tokens"):
        out[col] = out[col].fillna(0)
    return out.reset_index(drop=True)[list(TASK_COLUMNS)]


def window_tasks(tasks: pd.DataFrame, window: Window) -> pd.DataFrame:
    """Finished tasks whose end falls in the window."""
    if tasks.empty:
        return tasks
    end = tasks["end_s"].astype(float)
    return tasks[tasks["finished"] & (end >= window.start_s) & (end < window.end_s)]


def _pct(values: pd.Series, q: float) -> float:
    v = values.astype(float).to_numpy()
    v = v[np.isfinite(v)]
    return float(np.percentile(v, q)) if len(v) else math.nan


def task_metrics(tasks: pd.DataFrame, window: Window, gpus: int) -> dict[str, float]:
    """The per-engine task figures over the window (docs/metrics.md: "agent tasks")."""
    done = window_tasks(tasks, window)
    hours = window.duration_s / 3600.0
    n = len(done)
    return {
        "tasks_finished": n,
        "tasks_per_hour_per_gpu": n / hours / gpus if hours > 0 else math.nan,
        "task_latency_p50_s": _pct(done["latency_s"], 50) if n else math.nan,
        "task_latency_p90_s": _pct(done["latency_s"], 90) if n else math.nan,
        "task_slowdown_p50": _pct(done["slowdown"], 50) if n else math.nan,
        "task_slowdown_p90": _pct(done["slowdown"], 90) if n else math.nan,
        "task_requests_mean": float(done["requests"].mean()) if n else math.nan,
    }


__all__ = ["TASK_COLUMNS", "task_metrics", "task_table", "window_tasks"]
