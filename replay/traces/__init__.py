"""The trace layer: load, validate, describe, generate and convert agent traces.

`load_trace(src)` is the single entry point every executor uses; it returns the normalised
`Trace` of `replay.traces.model`.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from replay.traces.errors import TraceError
from replay.traces.loader import FORMATS, load_trace
from replay.traces.model import LoadIssue, Trace, Trajectory

SAMPLE_NAME = "sample-weka.jsonl.gz"


def sample_path() -> Path:
    """The bundled sample trace (Weka format), what the embedded default `replay run` replays."""
    path = Path(str(resources.files("replay") / "data" / SAMPLE_NAME))
    if not path.is_file():  # a broken install, not a user error: say what is missing
        raise FileNotFoundError(f"the bundled sample trace is missing: {path}")
    return path


__all__ = ["FORMATS", "LoadIssue", "Trace", "TraceError", "Trajectory", "load_trace", "sample_path"]
