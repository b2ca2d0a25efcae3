"""Bad flags and files that used to end in a traceback or be silently accepted (issue 24):
each now fails (or warns) with a message naming the flag, file or field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


def test_synth_scale_nan_is_named(tmp_path: Path) -> None:
    res = invoke("traces", "synth", "--scale", "nan", "--out", str(tmp_path / "t.jsonl"))
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit)
    assert "--scale must be a finite number of at least 1" in said(res)


def test_convert_says_which_per_request_fields_it_drops(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    req = {"t": 0, "type": "n", "model": "m", "in": 64, "out": 1, "hash_ids": [1],
           "input_types": ["text"], "output_types": ["text"]}  # fmt: skip
    src.write_text(json.dumps({"id": "s", "block_size": 64, "hash_id_scope": "local",
                               "models": ["m"], "requests": [req]}) + "\n")  # fmt: skip
    res = invoke("traces", "convert", str(src), "--to", "weka", "--out", str(tmp_path / "o.jsonl"))
    assert res.exit_code == 0, said(res)
    assert "dropped (not read from Weka traces): per-request model, input_types and" in said(res)


@pytest.mark.parametrize(
    ("engines", "message"),
    [
        ("", "--engines '': names no engine"),
        (" , ", "--engines ' , ': names no engine"),
        ("vllm,vllm", "--engines vllm,vllm: vllm given twice"),
    ],
)
def test_run_engines_empty_or_repeated_is_refused(engines: str, message: str) -> None:
    res = invoke("run", "--engines", engines, "--no-panel", "--out", "/nonexistent/x")
    assert res.exit_code == 2 and message in said(res)


def test_config_slo_field_is_named_by_its_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("engines: [{name: vllm, url: 'http://127.0.0.1:9'}]\nslo: {ttft_s: fast}\n")
    res = invoke("run", "--config", str(cfg), "--no-panel")
    assert res.exit_code == 2
    assert f"--config {cfg}: slo: field 'ttft_s': Input should be a valid number" in said(res)
    assert "slo.str" not in said(res)


def test_two_endpoints_on_one_url_are_warned_about(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9"
    res = invoke("run", "--endpoint", f"a=vllm@{url}", "--endpoint", f"b=vllm@{url}/",
                 "--trace", str(tmp_path / "missing.jsonl"), "--no-panel")  # fmt: skip
    assert "warning: engines a, b name one URL (http://127.0.0.1:9): they share" in said(res)


def test_simulate_repeats_are_dropped_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    from replay.commands.simulate import parse_policies, parse_sessions

    assert parse_policies("vllm,vllm,flashstate") == ["vllm", "flashstate"]
    assert parse_sessions("4,4") == [4]
    err = " ".join(capsys.readouterr().err.split())
    assert "--policies: vllm given more than once; each runs once" in err
    assert "--sessions: 4 given more than once" in err


def test_a_manifest_of_an_unknown_schema_version_is_warned_about(tmp_path: Path) -> None:
    from analysis.runs import load_run
    from replay.rundir import RunWriter
    from replay.rundir_models import Manifest

    run_dir = tmp_path / "run"
    with RunWriter(run_dir, Manifest.model_validate({"engines": [{"name": "a"}]})) as w:
        w.add({"engine": "a", "session": 0, "turn": 0, "prompt_tokens": 1, "status": "ok"})
    man = json.loads((run_dir / "manifest.json").read_text())
    man["schema_version"] = 2
    (run_dir / "manifest.json").write_text(json.dumps(man))
    notes = load_run(run_dir).notes
    assert any("manifest.json: schema_version 2, but this harness reads version 1" in n
               for n in notes), notes  # fmt: skip
    res = invoke("price", str(run_dir), "--gpu", "b200")
    assert "schema_version 2, but this harness reads version 1" in said(res)


def test_a_token_scale_past_the_longest_context_is_refused_wherever_it_is_given(
    tmp_path: Path,
) -> None:
    """Issue 36: `traces synth --scale 1e200` wrote `"t": null` and exited 0; the same bound
    holds for `--token-scale` and for a trace's declared token_scale."""
    res = invoke("traces", "synth", "--scale", "1e200", "--out", str(tmp_path / "t.jsonl"))
    assert res.exit_code == 2 and "--scale must be a finite number of at least 1 and at most " \
        "1,048,576" in said(res)  # fmt: skip
    assert not (tmp_path / "t.jsonl").exists()
    req = {"t": 0, "type": "n", "in": 64, "out": 1, "hash_ids": [1]}
    line = {"id": "s", "block_size": 64, "hash_id_scope": "local", "requests": [req]}
    plain, declared = tmp_path / "plain.jsonl", tmp_path / "declared.jsonl"
    plain.write_text(json.dumps(line) + "\n")
    declared.write_text(json.dumps({**line, "token_scale": 1e200}) + "\n")
    for trace, extra, named in [
        (plain, ["--token-scale", "1e200"], "--token-scale must be a finite number"),
        (declared, [], f"trace {declared}: token_scale must be a finite number"),
    ]:
        res = invoke("simulate", "--policies", "vllm", "--sessions", "1", "--trace",
                     str(trace), *extra, "--out", str(tmp_path / "o"))  # fmt: skip
        assert res.exit_code == 2, said(res)
        assert named in said(res) and "at most 1,048,576" in said(res)
