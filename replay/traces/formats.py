"""The trace formats `load_trace` reads, named where nothing heavy is imported: the command
line's `--format` help lists them without loading the parsers (numpy)."""

from __future__ import annotations

from typing import Literal

Format = Literal["weka", "mooncake"]
FORMATS: tuple[Format, ...] = ("weka", "mooncake")
