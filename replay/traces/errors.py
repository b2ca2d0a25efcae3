"""Load-time problems: `TraceError` for what stops a load, and the sink that collects the rest.

Policy (documented in docs/traces.md): problems that make a line unusable — malformed JSON, a
missing required field, a value of the wrong type, a negative length, an empty prompt, a time
past a year of the trace's clock, an unknown format — raise `TraceError` naming file, line
and field, strict or not, because a replay built on a guessed value would be wrong without
saying so. Inconsistencies that leave the line usable
(a `hash_ids` count that does not match `in` / `block_size`, times going backwards, an
unknown request `type`, an empty subagent) are collected as `LoadIssue`s on `Trace.issues`
and counted by the command; `strict=True` raises them as `TraceError` instead.
"""

from __future__ import annotations

from typing import NoReturn

from replay.traces.model import LoadIssue


class TraceError(ValueError):
    """A trace could not be loaded. `issue` says where (file, line, field) and what."""

    def __init__(self, issue: LoadIssue) -> None:
        super().__init__(str(issue))
        self.issue = issue


def fail(source: str, line: int | None, field: str, message: str) -> NoReturn:
    """Raise a `TraceError` for a problem that makes the line unusable."""
    raise TraceError(LoadIssue(source, line, field, message))


class IssueSink:
    """Collects inconsistencies, or raises the first one when `strict`."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.issues: list[LoadIssue] = []

    def add(self, source: str, line: int | None, field: str, message: str) -> None:
        issue = LoadIssue(source, line, field, message)
        if self.strict:
            raise TraceError(issue)
        self.issues.append(issue)
