"""The typed run directory: the models agree with docs/run-directory.md, old run directories still read,
the write rule refuses what the read rule tolerates, and every bad file is named with its
field, never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from analysis.manifest import (
    manifest_engines,
    manifest_seed,
    manifest_sessions,
    manifest_trace,
    manifest_window,
    manifest_working_set_ratio,
)
from replay.cli import app
from replay.records import RequestRecord
from replay.rundir import RunDirError, RunWriter, read_manifest, read_summary
from replay.rundir_contract import (
    CONTRACT_PAGE,
    contract_markdown,
    contract_section,
    written_problems,
)
from replay.rundir_models import Manifest, RunSummary

FIXTURES = Path(__file__).parent / "fixtures" / "rundir_v1"


def test_the_contract_page_tables_are_the_models() -> None:
    assert Path(__file__).parents[3] / "docs" / "run-directory.md" == CONTRACT_PAGE
    section = contract_section(CONTRACT_PAGE.read_text())
    assert section is not None, "docs/run-directory.md lost its rundir-contract markers"
    assert section == contract_markdown(), (
        "docs/run-directory.md's tables differ from replay/rundir_models.py: run "
        "`python -m replay.rundir_contract`"
    )
    # Every field the contract's file list names is a field of the model.
    for field in ("schema_version", "run_id", "command", "harness_version", "status"):
        assert field in Manifest.model_fields
    for field in ("window", "duration_s", "sessions", "seed", "time_scale", "gap_cap_s", "salt"):
        assert f"| `config.{field}` |" in section
    for field in ("name", "kind", "url", "model", "gpus", "gpu_type", "server_version", "flags"):
        assert f"| `engines[].{field}` |" in section
    for field in ("block_size", "preflight_warnings"):
        assert f"| `engines[].{field}` |" in section
    for field in ("trace.path", "trace.sha256", "start", "end", "events", "emulator_restarts"):
        assert f"| `{field}` |" in section


def test_every_field_is_described() -> None:
    from replay.rundir_contract import contract_rows

    for model in (Manifest, RunSummary):
        missing = [p for p, _, d in contract_rows(model) if not d]
        assert not missing, f"{model.__name__}: fields without a description: {missing}"


@pytest.mark.rundir_unchecked  # the fixtures are in the old shapes on purpose
def test_old_live_and_simulated_run_directories_still_read(tmp_path: Path) -> None:
    live, sim = tmp_path / "live", tmp_path / "sim"
    shutil.copytree(FIXTURES / "live", live)
    shutil.copytree(FIXTURES / "sim", sim)

    man = read_manifest(live)  # written by the live client before the models
    assert man.executor == "live" and man.status == "completed" and man.emulated is True
    assert manifest_window(man) is not None and manifest_window(man).as_list() == [6.0, 18.0]  # type: ignore[union-attr]
    assert manifest_sessions(man) == 2 and manifest_seed(man) == 0
    eng = manifest_engines(man)["vllm"]
    assert eng.gpus == 2 and eng.gpu_type == "B200" and "engine=vllm" in eng.flags
    assert man.replay_fidelity["vllm"].warm_start_flagged is False
    assert man.workload is not None and man.workload.assignments == {"vllm": 2}
    summary = read_summary(live)
    assert summary is not None and summary.engines["vllm"]["requests"] is not None

    man = read_manifest(sim)  # the simulator wrote `flags` as its option dict
    assert man.executor == "simulator" and man.config.policy == "flashstate"
    assert manifest_engines(man)["flashstate"].flags == ["tiers=True"]
    assert manifest_trace(man) == (
        "replay/data/sample-weka.jsonl.gz",
        "1747eaab1f0173373463d03cd199ca91f667c1165e37651fb82628c630c80a16",
    )
    assert manifest_working_set_ratio(man, "flashstate") == pytest.approx(0.0346, abs=1e-4)
    old = read_summary(sim)  # its own row, with a top-level `simulator` key: dropped on read
    assert old is not None and old.engines["flashstate"]["resident_checkpoints"] > 0
    assert "simulator" not in old.model_dump()
    # Read, then written again through the model: the write rule holds.
    Manifest.model_validate(man.model_dump())


@pytest.mark.rundir_unchecked
def test_unknown_keys_are_ignored_on_read_and_refused_on_write(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    data = {"status": "completed", "from_the_future": 1, "config": {"new_knob": 2}}
    (run / "manifest.json").write_text(json.dumps(data))
    man = read_manifest(run)
    assert man.status == "completed" and "from_the_future" not in man.model_dump()
    with pytest.raises(ValidationError, match="from_the_future"):
        Manifest.model_validate(data)
    assert written_problems(tmp_path) and "from_the_future" in written_problems(tmp_path)[0]
    w = RunWriter(tmp_path / "w", Manifest()).open()
    with pytest.raises(ValidationError, match="bogus"):
        w.update_manifest(bogus=1)
    w.close()
    assert not written_problems(tmp_path / "w")


@pytest.mark.rundir_unchecked
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{oops", r"manifest\.json: not valid JSON"),
        ("[1, 2]", r"manifest\.json: expected a JSON object, got list"),
        (
            '{"engines": [{"name": "a", "gpus": "two"}]}',
            r"manifest\.json: field 'engines\.0\.gpus': Input should be a valid integer, "
            r"got 'two'",
        ),
        (
            '{"config": {"window": [60, 10]}}',
            r"manifest\.json: field 'config\.window': a window must have 0 <= start < end",
        ),
        ('{"status": "finished"}', r"field 'status': Input should be 'running', 'completed'"),
    ],
)
def test_a_bad_manifest_is_named_with_its_field(tmp_path: Path, text: str, message: str) -> None:
    run = tmp_path / "run"
    with RunWriter(run, Manifest(engines=[])) as w:
        w.add(
            RequestRecord(
                engine="a", session=0, trajectory="t", agent="main", turn=0, scheduled_s=1.0
            )
        )
    (run / "manifest.json").write_text(text)
    with pytest.raises(RunDirError, match=message):
        read_manifest(run)
    res = CliRunner().invoke(app, ["report", str(run), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "manifest.json" in res.output and ("field" in message) == ("field" in res.output)


@pytest.mark.rundir_unchecked
def test_a_bad_summary_is_named_with_its_field(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text('{"engines": {"a": {"error_flagged": "maybe"}}}')
    with pytest.raises(RunDirError, match=r"summary\.json: field 'engines\.a\.error_flagged'"):
        read_summary(run)
    assert read_summary(tmp_path / "none") is None
