"""A tiny run-directory builder for analysis tests: real files written with `RunWriter`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replay.records import RequestRecord
from replay.rundir import RunWriter
from replay.rundir_models import Manifest


class RunBuilder:
    """Collects request records, then writes a run directory with `RunWriter`.

    `req(...)` takes the columns that matter in a test and fills the rest: `first` and `done`
    default to `scheduled` + 1 s and + 2 s, `output` to 10 tokens.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.rows: list[RequestRecord] = []

    def req(
        self,
        engine: str,
        scheduled: float,
        *,
        session: int = 0,
        trajectory: str = "t0",
        turn: int = 0,
        first: float | None = None,
        done: float | None = None,
        prompt: int = 1000,
        cached: int | None = 0,
        ideal: int = 0,
        output: int = 10,
        status: str = "ok",
        **extra: Any,
    ) -> RunBuilder:
        self.rows.append(
            RequestRecord(
                engine=engine,
                session=session,
                trajectory=trajectory,
                agent=extra.pop("agent", "main"),
                turn=turn,
                scheduled_s=scheduled,
                sent_s=scheduled,
                first_token_s=scheduled + 1.0 if first is None else first,
                done_s=scheduled + 2.0 if done is None else done,
                prompt_tokens=prompt,
                cached_tokens=cached,
                ideal_cached_tokens=ideal,
                output_tokens=output,
                expected_output_tokens=output,
                status=status,  # type: ignore[arg-type]
                **extra,
            )
        )
        return self

    def write(self, name: str = "run", **manifest: Any) -> Path:
        run_dir = self.root / name
        man = {"engines": [{"name": "a", "gpus": 1}, {"name": "b", "gpus": 2}]}
        man.update(manifest)
        with RunWriter(run_dir, Manifest.model_validate(man)) as writer:
            for row in self.rows:
                writer.add(row)
        return run_dir


@pytest.fixture
def builder(tmp_path: Path) -> Callable[[], RunBuilder]:
    return lambda: RunBuilder(tmp_path)
