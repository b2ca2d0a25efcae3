"""The trace layer: load, validate, describe, generate and convert agent traces.

`load_trace(src)` is the single entry point every executor uses; it returns the normalised
`Trace` of `replay.traces.model`.
"""

from __future__ import annotations

from importlib import import_module, resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replay.traces.formats import FORMATS

if TYPE_CHECKING:
    from replay.traces.errors import TraceError
    from replay.traces.loader import load_trace
    from replay.traces.model import LoadIssue, Trace, Trajectory

SAMPLE_NAME = "sample-weka.jsonl.gz"


def sample_path() -> Path:
    """The bundled sample trace (Weka format), what the embedded default `replay run` replays."""
    path = Path(str(resources.files("replay") / "data" / SAMPLE_NAME))
    if not path.is_file():  # a broken install, not a user error: say what is missing
        raise FileNotFoundError(f"the bundled sample trace is missing: {path}")
    return path


__all__ = ["FORMATS", "LoadIssue", "Trace", "TraceError", "Trajectory", "load_trace", "sample_path"]


# The loader and the model (numpy) load on first use of one of these names, so that what
# needs only the formats or the sample's path (the command line's --help) loads neither.
_LAZY = {
    "TraceError": "replay.traces.errors",
    "load_trace": "replay.traces.loader",
    "LoadIssue": "replay.traces.model",
    "Trace": "replay.traces.model",
    "Trajectory": "replay.traces.model",
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'replay.traces' has no attribute {name!r}")
    value = getattr(import_module(where), name)
    globals()[name] = value
    return value
