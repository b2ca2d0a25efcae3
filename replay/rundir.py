"""The run directory (a contract): manifest, request records, server metrics, summary.

```
runs/<run-id>/
  manifest.json           what ran, with what, and how it ended
  requests.parquet        one row per request; rewritten atomically while the run goes
  requests.jsonl          the append-only journal the parquet file is built from: a killed
                          run keeps every record up to its last flush
  server_metrics.parquet  scraped engine metrics (live runs)
  summary.json            per-engine window metrics
  writer.lock             the one writer's pid and start time while a run is written
```

A run directory has one writer, which holds `RunLock` (replay.rundir_lock, re-exported here)
for the run's life. manifest.json and summary.json are read and written through their models
(replay.rundir_models); the readers are in replay.rundir_read, re-exported here.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from replay.records import (
    REQUEST_SCHEMA,
    RequestRecord,
    records_to_table,
)
from replay.redact import Scrubber
from replay.rundir_journal import (
    DiskFullError,
    append_whole,
    cut_torn_tail,
    torn_tail_bytes,
    write_atomic,
    write_in_place,
)
from replay.rundir_lock import (
    LOCK,
    RunDirError,
    RunLock,
    RunLockedError,
    lock_holder,
    utc_now,
)
from replay.rundir_models import Manifest, RunStatus, RunSummary
from replay.rundir_read import (
    JOURNAL,
    MANIFEST,
    REQUESTS,
    SERVER_METRICS,
    SUMMARY,
    parse_manifest,
    read_journal,
    read_manifest,
    read_requests,
    read_summary,
    schema_note,
)

# A `running` run whose writer holds no lock, or whose heartbeat (written every 5 s) is older
# than this, was killed: it is shown as `interrupted (stale)`.
STALE_AFTER_S = 60.0


def run_status(run_dir: Path, manifest: Manifest) -> str:
    """The manifest's status, except that a `running` run nobody is writing any more (its
    lock is free, or its heartbeat is older than STALE_AFTER_S) reads `interrupted (stale)`."""
    status = str(manifest.status or "unknown")
    if status != "running":
        return status
    if (Path(run_dir) / LOCK).exists():
        return "running" if lock_holder(run_dir) is not None else "interrupted (stale)"
    beat = manifest.heartbeat or manifest.start
    try:
        when = dt.datetime.fromisoformat(str(beat))
    except ValueError:
        return status
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    age = (dt.datetime.now(dt.UTC) - when).total_seconds()
    return "interrupted (stale)" if age > STALE_AFTER_S else status


def new_run_id(prefix: str = "run") -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{stamp}-{secrets.token_hex(3)}"


def _json_bytes(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Through a temporary file; DiskFullError (naming the path) on a full disk."""
    data = _json_bytes(obj)
    write_atomic(path, lambda tmp: tmp.write_bytes(data))


def write_table_atomic(path: Path, table: pa.Table) -> None:
    write_atomic(path, lambda tmp: pq.write_table(table, tmp))


class RunWriter:
    """Writes one run directory incrementally.

    Records are appended to the journal on every `flush()` (cheap, durable); the parquet file
    is rebuilt atomically at most every `parquet_interval_s` and at `close()`, so readers see
    a valid `requests.parquet` at any moment.

    A full disk stops every write but the last: the first `DiskFullError` is kept in
    `disk_full` (the caller ends its run), later writes are skipped, and `close()` writes
    the manifest as `failed` with the error (in place, if no temporary file fits), then
    raises it.
    """

    def __init__(
        self,
        run_dir: Path,
        manifest: Manifest,
        parquet_interval_s: float = 5.0,
        scrubber: Scrubber | None = None,
    ):
        self.run_dir = Path(run_dir)
        self.scrubber = scrubber or Scrubber()
        self.manifest = manifest.model_copy(deep=True)
        self._lock = RunLock(self.run_dir)
        self.parquet_interval_s = parquet_interval_s
        self._rows: list[dict[str, Any]] = []
        self._pending: list[dict[str, Any]] = []
        self._journal: Any = None
        self._last_parquet = 0.0
        self._closed = False
        self.disk_full: DiskFullError | None = None

    # lifecycle -------------------------------------------------------------------------
    def open(self, resume: bool = False) -> RunWriter:
        self._lock.acquire()  # held until close(); RunLockedError if another process writes
        try:
            if resume:
                torn = cut_torn_tail(self.run_dir / JOURNAL)
                if torn:
                    self.manifest.notes.append(
                        f"{JOURNAL}: a torn last line ({torn} bytes, left by the kill) was cut "
                        "before resuming"
                    )
                self._rows = read_journal(self.run_dir)
            elif (self.run_dir / JOURNAL).exists():
                raise RunDirError(
                    f"{self.run_dir}: already holds a run; pass a new --out or --resume it"
                )
        except BaseException:
            self._lock.release()
            raise
        m = self.manifest
        m.run_id = m.run_id or self.run_dir.name
        m.start = m.start or utc_now()
        m.status = "running"
        if self._lock.stale_note:
            m.notes.append(self._lock.stale_note)
        try:
            self._write_manifest()
        except DiskFullError:
            self._lock.release()
            raise
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        self._journal = os.open(self.run_dir / JOURNAL, flags, 0o644)  # closed in close()
        return self

    def _guard(self, write: Callable[[], None]) -> None:
        """Run one write unless the disk already filled; keep the first DiskFullError."""
        if self.disk_full is not None:
            return
        try:
            write()
        except DiskFullError as e:
            self.disk_full = e

    def _write_manifest(self, last: bool = False) -> None:
        data = self.scrubber.obj(self.manifest.model_dump(mode="json", exclude_none=True))
        try:
            write_json_atomic(self.run_dir / MANIFEST, data)
        except DiskFullError:
            if not last:
                raise
            self._write_last_manifest(data)

    def _write_last_manifest(self, data: Any) -> None:
        """The final manifest on a full disk: compact, then after removing requests.parquet
        (derived: readers rebuild it from the journal), then over the old file's own
        blocks if it fits there; never a half-written file."""
        path, text = self.run_dir / MANIFEST, orjson.dumps(data)
        try:
            write_atomic(path, lambda tmp: tmp.write_bytes(text))
            return
        except DiskFullError:
            (self.run_dir / REQUESTS).unlink(missing_ok=True)
        try:
            write_atomic(path, lambda tmp: tmp.write_bytes(text))
        except DiskFullError:
            if len(text) > path.stat().st_size:
                raise
            write_in_place(path, text)

    def close(self, status: RunStatus = "completed", summary: RunSummary | None = None) -> None:
        if self._closed:
            return
        self.flush(force_parquet=True)
        if self._journal is not None:
            os.close(self._journal)
            self._journal = None
        if summary is not None:
            self._guard(lambda: self.write_summary(summary))
        self.manifest.status = "failed" if self.disk_full is not None else status
        self.manifest.end = utc_now()
        if self.disk_full is not None:
            self.manifest.error = str(self.disk_full)
        try:
            self._write_manifest(last=True)
        finally:
            self._closed = True
            self._lock.release()
        if self.disk_full is not None:
            raise self.disk_full

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
        if row.get("error"):
            row = {**row, "error": self.scrubber.error(str(row["error"]))}
        self._pending.append(row)

    def flush(self, force_parquet: bool = False) -> None:
        """Append the pending records to the journal (whole lines or nothing), and rebuild
        the parquet file when due; a full disk is kept in `disk_full`, not raised."""
        self._guard(lambda: self._flush(force_parquet))

    def _flush(self, force_parquet: bool) -> None:
        if self._pending and self._journal is not None:
            data = b"".join(orjson.dumps(r) + b"\n" for r in self._pending)
            append_whole(self._journal, self.run_dir / JOURNAL, data)
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
        """Set manifest fields (validated: an unknown or wrongly typed field is a
        ValidationError, a bug of the producer) and rewrite the file."""
        data = self.manifest.model_dump(exclude_unset=True)
        self.manifest = Manifest.model_validate({**data, **fields})
        self._guard(self._write_manifest)

    def write_server_metrics(self, table: pa.Table) -> None:
        self._guard(lambda: write_table_atomic(self.run_dir / SERVER_METRICS, table))

    def write_summary(self, summary: RunSummary) -> None:
        write_summary_file(self.run_dir, summary)


def write_summary_file(run_dir: Path, summary: RunSummary) -> None:
    """Atomically write the run's summary.json (analysis.summary is its one producer)."""
    write_json_atomic(Path(run_dir) / SUMMARY, summary.model_dump(mode="json"))


__all__ = [
    "JOURNAL",
    "LOCK",
    "MANIFEST",
    "REQUESTS",
    "REQUEST_SCHEMA",
    "SERVER_METRICS",
    "SUMMARY",
    "DiskFullError",
    "Manifest",
    "RunDirError",
    "RunLock",
    "RunLockedError",
    "RunStatus",
    "RunSummary",
    "RunWriter",
    "lock_holder",
    "new_run_id",
    "parse_manifest",
    "read_journal",
    "read_manifest",
    "read_requests",
    "read_summary",
    "run_status",
    "schema_note",
    "torn_tail_bytes",
    "write_summary_file",
]
