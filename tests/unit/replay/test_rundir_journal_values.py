"""A journal line whose value the request schema cannot hold (issue 36): `prompt_tokens`
1e30, "abc" or -5 in requests.jsonl, with requests.parquet gone, is named by file, line and
field where the journal is read, so `replay price` says so instead of an Arrow traceback (or
pricing -5 tokens)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.records import RequestRecord
from replay.rundir import RunWriter, read_requests
from replay.rundir_lock import RunDirError
from replay.rundir_models import Manifest


def _run(tmp_path: Path, value: object) -> Path:
    run = tmp_path / "run"
    w = RunWriter(run, Manifest(command="test")).open()
    for turn in range(3):
        w.add(RequestRecord(engine="vllm", session=0, trajectory="t", agent="main", turn=turn,
                            scheduled_s=turn, sent_s=turn, first_token_s=turn + 0.1,
                            done_s=turn + 0.5, prompt_tokens=100, output_tokens=10))  # fmt: skip
    w.close("completed")
    (run / "requests.parquet").unlink()
    lines = (run / "requests.jsonl").read_bytes().splitlines()
    row = orjson.loads(lines[1])
    row["prompt_tokens"] = value
    lines[1] = orjson.dumps(row)
    (run / "requests.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return run


@pytest.mark.parametrize(
    ("value", "said"),
    [(1e30, "field 'prompt_tokens' is '1e+30', not a whole number"),
     ("abc", "field 'prompt_tokens' is 'abc', not a whole number"),
     (-5, "field 'prompt_tokens' is -5, outside 0..16,777,216 tokens")],
)  # fmt: skip
def test_a_damaged_journal_value_is_named_by_line_and_field(
    tmp_path: Path, value: object, said: str
) -> None:
    run = _run(tmp_path, value)
    with pytest.raises(RunDirError) as e:
        read_requests(run)
    assert f"requests.jsonl: line 2: {said}" in str(e.value)
    assert "restore or delete line 2" in str(e.value)
    res = CliRunner().invoke(app, ["price", str(run)])
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert f"line 2: {said}" in text
