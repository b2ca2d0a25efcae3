"""Reading a run directory: the journal, the manifest, the summary and the request records,
each validated, every problem a `RunDirError` naming the file (and line or field). Re-exported
by `replay.rundir`, the run directory's one module for callers."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from replay.records import RECORD_FIELDS, records_to_table, row_problem
from replay.rundir_lock import RunDirError
from replay.rundir_models import READ, Manifest, RunSummary

MANIFEST = "manifest.json"
REQUESTS = "requests.parquet"
JOURNAL = "requests.jsonl"
SERVER_METRICS = "server_metrics.parquet"
SUMMARY = "summary.json"


# reading ---------------------------------------------------------------------------------
def read_journal(run_dir: Path) -> list[dict[str, Any]]:
    """Every complete line of the journal (a torn last line from a kill is skipped; readers
    count it with `torn_tail_bytes`)."""
    path = Path(run_dir) / JOURNAL
    if not path.exists():
        return []
    rows: list[dict[str, Any]] = []
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.endswith(b"\n"):
                break
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise RunDirError(
                    f"{path}: line {number} is not valid JSON ({e.msg} at column {e.colno}); "
                    "the harness writes whole lines, so the file was edited or damaged: "
                    f"restore or delete line {number}"
                ) from None
            if not isinstance(row, dict):
                raise RunDirError(
                    f"{path}: line {number} is not a JSON object (a request record); "
                    f"restore or delete line {number}"
                )
            if (problem := row_problem(row)) is not None:
                raise RunDirError(
                    f"{path}: line {number}: {problem}; the harness never writes that, so the "
                    f"file was edited or damaged: restore or delete line {number}"
                )
            rows.append(row)
    return rows


def _journal_lines(run_dir: Path) -> int:
    """Complete lines in the journal (0 when there is none)."""
    path = Path(run_dir) / JOURNAL
    if not path.exists():
        return 0
    data = path.read_bytes()
    return data.count(b"\n")


def _modified_after(path: Path, other: Path) -> bool:
    """`path` was modified after `other` (False when either is missing)."""
    try:
        return path.stat().st_mtime_ns > other.stat().st_mtime_ns
    except OSError:
        return False


_M = TypeVar("_M", bound=BaseModel)


def _validate_file(path: Path, model: type[_M], data: Any, fix: str) -> _M:
    """`data` read from `path` as `model` (unknown keys ignored: the read rule of
    replay.rundir_models); RunDirError naming the file and the first bad field."""
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a JSON object, got {type(data).__name__}; {fix}")
    try:
        return model.model_validate(data, context={READ: True})
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "(top level)"
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] != "value_error":  # a value error's message shows the value itself
            msg += f", got {err.get('input')!r}"
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise RunDirError(f"{path}: field '{field}': {msg}{more}; {fix}") from None


def parse_manifest(path: Path, data: Any) -> Manifest:
    """A manifest's parsed JSON, validated (see `_validate_file`)."""
    return _validate_file(path, Manifest, data, "fix or restore the file (docs/run-directory.md)")


def schema_note(path: Path, version: object, known: int) -> str | None:
    """The warning for a file written under a schema this harness does not know, else None."""
    if version == known:
        return None
    return (
        f"{path}: schema_version {version!r}, but this harness reads version {known}: fields "
        "it does not know are ignored and figures may be misread; read it with the harness "
        "that wrote it"
    )


def read_manifest(run_dir: Path) -> Manifest:
    """The run's manifest.json, validated; RunDirError naming the file (and field)."""
    path = Path(run_dir) / MANIFEST
    try:
        data = orjson.loads(path.read_bytes())
    except (FileNotFoundError, NotADirectoryError) as e:
        raise RunDirError(f"{path}: missing; is {run_dir} a run directory?") from e
    except orjson.JSONDecodeError as e:
        raise RunDirError(f"{path}: not valid JSON ({e}); fix or restore the file") from None
    return parse_manifest(path, data)


def read_summary(run_dir: Path) -> RunSummary | None:
    """The run's summary.json, validated; None when there is none. RunDirError naming the
    file (and field) when it is broken."""
    path = Path(run_dir) / SUMMARY
    fix = "delete it and run `replay report` to rebuild it"
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except orjson.JSONDecodeError as e:
        raise RunDirError(f"{path}: not valid JSON ({e}); {fix}") from None
    return _validate_file(path, RunSummary, data, fix)


def read_requests(run_dir: Path) -> pd.DataFrame:
    """The run's request records; prefers the journal when it is ahead of the parquet file
    (a run still being written, or one killed between parquet rewrites)."""
    run_dir = Path(run_dir)
    pq_path = run_dir / REQUESTS
    table: pa.Table | None = None
    journal = run_dir / JOURNAL
    if pq_path.exists():
        try:
            table = pq.read_table(pq_path)
        except (pa.ArrowInvalid, OSError) as e:
            fix = (
                f"; it is derived from {JOURNAL}: delete {pq_path} and it is rebuilt from the "
                "journal"
                if journal.exists()
                else f", and there is no {JOURNAL} to rebuild it from: restore the file"
            )
            raise RunDirError(f"{pq_path}: unreadable parquet ({e}){fix}") from e
    # Parse the journal only when it is ahead of the parquet file: counting its complete
    # lines is far cheaper than decoding them, and a finished run's journal never is. A
    # journal changed after the parquet was written (the writer writes the parquet after
    # the journal's last line: an edited journal, a resume killed before its first
    # rewrite) is the records' truth too.
    if (
        table is None
        or _journal_lines(run_dir) > table.num_rows
        or _modified_after(journal, pq_path)
    ):
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
    "JOURNAL",
    "MANIFEST",
    "REQUESTS",
    "SERVER_METRICS",
    "SUMMARY",
    "parse_manifest",
    "read_journal",
    "read_manifest",
    "read_requests",
    "read_summary",
    "schema_note",
]
