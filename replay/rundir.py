"""The run directory (a contract): manifest, request records, server metrics, summary.

```
runs/<run-id>/
  manifest.json           what ran, with what, and how it ended
  requests.parquet        one row per request; rewritten atomically while the run goes
  requests.jsonl          the append-only journal the parquet file is built from: a killed
                          run keeps every record up to its last flush
  server_metrics.parquet  scraped engine metrics (live runs)
  summary.json            per-engine window metrics
```
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import time
from pathlib import Path
from typing import Any, Literal

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from replay.records import (
    RECORD_FIELDS,
    REQUEST_SCHEMA,
    SCHEMA_VERSION,
    RequestRecord,
    records_to_table,
)

RunStatus = Literal["running", "completed", "interrupted", "failed"]

MANIFEST = "manifest.json"
REQUESTS = "requests.parquet"
JOURNAL = "requests.jsonl"
SERVER_METRICS = "server_metrics.parquet"
SUMMARY = "summary.json"


class RunDirError(Exception):
    """A run directory that is missing, unreadable or malformed; the message names the file."""


def new_run_id(prefix: str = "run") -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{stamp}-{secrets.token_hex(3)}"


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    os.replace(tmp, path)


def write_table_atomic(path: Path, table: pa.Table) -> None:
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


class RunWriter:
    """Writes one run directory incrementally.

    Records are appended to the journal on every `flush()` (cheap, durable); the parquet file
    is rebuilt atomically at most every `parquet_interval_s` and at `close()`, so readers see
    a valid `requests.parquet` at any moment.
    """

    def __init__(self, run_dir: Path, manifest: dict[str, Any], parquet_interval_s: float = 5.0):
        self.run_dir = Path(run_dir)
        self.manifest = dict(manifest)
        self.parquet_interval_s = parquet_interval_s
        self._rows: list[dict[str, Any]] = []
        self._pending: list[dict[str, Any]] = []
        self._journal: Any = None
        self._last_parquet = 0.0
        self._closed = False

    # lifecycle -------------------------------------------------------------------------
    def open(self, resume: bool = False) -> RunWriter:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if resume:
            self._rows = read_journal(self.run_dir)
        elif (self.run_dir / JOURNAL).exists():
            raise RunDirError(
                f"{self.run_dir}: already holds a run; pass a new --out or --resume it"
            )
        self.manifest.setdefault("schema_version", SCHEMA_VERSION)
        self.manifest.setdefault("run_id", self.run_dir.name)
        self.manifest.setdefault("start", utc_now())
        self.manifest["status"] = "running"
        write_json_atomic(self.run_dir / MANIFEST, self.manifest)
        self._journal = open(self.run_dir / JOURNAL, "ab")  # noqa: SIM115 - closed in close()
        return self

    def close(self, status: RunStatus = "completed", summary: dict[str, Any] | None = None) -> None:
        if self._closed:
            return
        self.flush(force_parquet=True)
        if self._journal is not None:
            self._journal.close()
        if summary is not None:
            write_json_atomic(self.run_dir / SUMMARY, summary)
        self.manifest["status"] = status
        self.manifest["end"] = utc_now()
        write_json_atomic(self.run_dir / MANIFEST, self.manifest)
        self._closed = True

    def __enter__(self) -> RunWriter:
        return self.open()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close("completed")
        elif issubclass(exc_type, KeyboardInterrupt):
            self.close("interrupted")
        else:
            self.close("failed")

    # records ---------------------------------------------------------------------------
    def add(self, record: RequestRecord | dict[str, Any]) -> None:
        row = record.as_dict() if isinstance(record, RequestRecord) else record
        self._pending.append(row)

    def flush(self, force_parquet: bool = False) -> None:
        if self._pending and self._journal is not None:
            self._journal.write(b"".join(orjson.dumps(r) + b"\n" for r in self._pending))
            self._journal.flush()
            self._rows.extend(self._pending)
            self._pending.clear()
        now = time.monotonic()
        if force_parquet or now - self._last_parquet >= self.parquet_interval_s:
            write_table_atomic(self.run_dir / REQUESTS, records_to_table(self._rows))
            self._last_parquet = now

    @property
    def num_records(self) -> int:
        return len(self._rows) + len(self._pending)

    def update_manifest(self, **fields: Any) -> None:
        self.manifest.update(fields)
        write_json_atomic(self.run_dir / MANIFEST, self.manifest)

    def write_server_metrics(self, table: pa.Table) -> None:
        write_table_atomic(self.run_dir / SERVER_METRICS, table)

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json_atomic(self.run_dir / SUMMARY, summary)


# reading ---------------------------------------------------------------------------------
def read_journal(run_dir: Path) -> list[dict[str, Any]]:
    """Every complete line of the journal (a torn last line from a kill is skipped)."""
    path = Path(run_dir) / JOURNAL
    if not path.exists():
        return []
    rows: list[dict[str, Any]] = []
    with open(path, "rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break
            rows.append(orjson.loads(line))
    return rows


def _journal_lines(run_dir: Path) -> int:
    """Complete lines in the journal (0 when there is none)."""
    path = Path(run_dir) / JOURNAL
    if not path.exists():
        return 0
    data = path.read_bytes()
    return data.count(b"\n")


def read_manifest(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / MANIFEST
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError as e:
        raise RunDirError(f"{path}: missing; is {run_dir} a run directory?") from e
    except orjson.JSONDecodeError as e:
        raise RunDirError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a JSON object")
    return data


def read_requests(run_dir: Path) -> pd.DataFrame:
    """The run's request records; prefers the journal when it is ahead of the parquet file
    (a run still being written, or one killed between parquet rewrites)."""
    run_dir = Path(run_dir)
    pq_path = run_dir / REQUESTS
    table: pa.Table | None = None
    if pq_path.exists():
        try:
            table = pq.read_table(pq_path)
        except (pa.ArrowInvalid, OSError) as e:
            raise RunDirError(f"{pq_path}: unreadable parquet ({e})") from e
    # Parse the journal only when it is ahead of the parquet file: counting its complete
    # lines is far cheaper than decoding them, and a finished run's journal never is.
    if table is None or _journal_lines(run_dir) > table.num_rows:
        journal_rows = read_journal(run_dir)
        if not journal_rows and table is None:
            raise RunDirError(f"{pq_path}: missing; the run wrote no request records")
        table = records_to_table(journal_rows)
    missing = [c for c in ("engine", "prompt_tokens", "status") if c not in table.column_names]
    if missing:
        raise RunDirError(f"{pq_path}: missing columns {', '.join(missing)}")
    df = table.to_pandas()
    for name in RECORD_FIELDS:
        if name not in df.columns:
            df[name] = None
    return df


__all__ = [
    "REQUEST_SCHEMA",
    "RunDirError",
    "RunWriter",
    "new_run_id",
    "read_journal",
    "read_manifest",
    "read_requests",
]
