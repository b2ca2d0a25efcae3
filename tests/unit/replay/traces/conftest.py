"""Fixtures for the trace-layer tests: writing small traces to disk."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest


@pytest.fixture
def write_jsonl(tmp_path: Path) -> Callable[..., Path]:
    """Write objects (or raw strings) as JSON lines; returns the path."""

    def write(rows: list[Any], name: str = "trace.jsonl") -> Path:
        path = tmp_path / name
        lines = [r if isinstance(r, str) else orjson.dumps(r).decode() for r in rows]
        path.write_text("\n".join(lines) + "\n")
        return path

    return write
