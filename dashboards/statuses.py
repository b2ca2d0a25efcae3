"""How a run's requests ended, per engine: completed, cancelled, failed, not sent.

A request the run's end cut off is recorded `cancelled`, with a `done_s` (the moment it was cut
off): it did not complete and is never counted as completed here. The statuses are the record
schema's (`replay.records.STATUSES`); a record without one is read as `ok`, as analysis does.
"""

from __future__ import annotations

import pandas as pd

# (status, column title) in the order the Live page shows them.
COLUMNS = (
    ("ok", "completed"),
    ("cancelled", "cancelled at the end"),
    ("error", "errors"),
    ("timeout", "timeouts"),
    ("overflow", "over the context (not sent)"),
)


def status_counts(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per engine (in record order): how many records ended in each status, an
    `other` column for any status the schema does not name (only when there is one), and
    `recorded` (all of them)."""
    if requests.empty:
        return pd.DataFrame(columns=["engine", *(t for _, t in COLUMNS), "recorded"])
    status = (
        requests["status"].fillna("ok").astype(str)
        if "status" in requests.columns
        else pd.Series("ok", index=requests.index)
    )
    engines = [str(e) for e in pd.unique(requests["engine"].dropna())]
    known = {s for s, _ in COLUMNS}
    rows = []
    for engine in engines:
        mine = status[(requests["engine"] == engine).to_numpy()]
        row: dict[str, object] = {"engine": engine}
        row.update({title: int((mine == s).sum()) for s, title in COLUMNS})
        other = int((~mine.isin(known)).sum())
        if other:
            row["other"] = other
        row["recorded"] = len(mine)
        rows.append(row)
    out = pd.DataFrame(rows)
    if "other" in out.columns:
        out["other"] = out["other"].fillna(0).astype(int)
        out = out[[c for c in out.columns if c != "recorded"] + ["recorded"]]
    return out


__all__ = ["COLUMNS", "status_counts"]
