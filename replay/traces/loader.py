"""`load_trace`: one entry point for every source and format.

Sources: a local `.jsonl` / `.jsonl.gz` file, a folder of `.json` (or `.jsonl`) files, or a
Hugging Face dataset id (`hf:owner/name`, or any `owner/name` that is not a local path),
streamed with `datasets`. Formats: Weka (a line has `requests`) and Mooncake (a line has
`input_length`), detected from the first record unless `fmt` is given. Parsing and format
detection, which both sources share, live in `replay.traces.parse`.
"""

from __future__ import annotations

import re
from pathlib import Path

from replay.traces.errors import IssueSink, TraceError, fail
from replay.traces.hf import load_hub
from replay.traces.model import Trace
from replay.traces.parse import FORMATS, Format, build_trace, detect_format, parse_lines
from replay.traces.sources import LocalSource

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_LOCAL_SUFFIXES = (".json", ".jsonl", ".gz")


def load_trace(src: str | Path, *, strict: bool = False, fmt: str | None = None) -> Trace:
    """Load a trace from a file, folder or dataset id; see the module docstring.

    Raises `TraceError` (file:line, field, expectation) on unusable input; with `strict`,
    inconsistencies raise too instead of being collected in `Trace.issues`.
    """
    name = str(src)
    if fmt is not None and fmt not in FORMATS:
        fail(
            name, None, "--format", f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}"
        )
    if name.startswith("hf:"):
        return load_hub(name[3:], strict=strict, fmt=fmt)
    path = Path(name)
    if not path.exists():
        if _HUB_ID.match(name) and not name.endswith(_LOCAL_SUFFIXES):
            return load_hub(name, strict=strict, fmt=fmt)
        fail(
            name,
            None,
            "src",
            "no such file or folder; expected a .jsonl or .jsonl.gz file, a folder of .json "
            "files, or a Hugging Face dataset id written hf:owner/name",
        )
    source = LocalSource.open(path)
    sink = IssueSink(strict)
    trace = build_trace(parse_lines(source.records(), sink), name, sink, fmt)
    trace.sha256 = source.sha256
    return trace


__all__ = ["FORMATS", "Format", "TraceError", "build_trace", "detect_format", "load_trace"]
