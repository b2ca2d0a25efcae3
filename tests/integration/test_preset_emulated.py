"""`replay run --preset agentx` on the built-in emulators (issue 35, point 1): the preset's
rules reach an emulated run end to end (the bundled sample, 2 sessions, 8 modelled minutes
at 60x: a few seconds of replay), its spec records them, and the run says which of aiperf's
rules it used and which it did not. The aiperf comparison itself is
`scripts/agentx_compare.py` (docs/field-numbers.md)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from replay.cli import app
from replay.rundir import read_manifest, read_summary


def test_the_agentx_preset_runs_on_the_emulators(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = CliRunner().invoke(
        app,
        ["run", "--preset", "agentx", "--engines", "vllm,flashstate", "--sessions", "2",
         "--duration-min", "8", "--time-scale", "60", "--no-panel", "--out", str(out)],
    )  # fmt: skip
    text = " ".join((res.output + res.stderr).split())
    assert res.exit_code == 0, text[-3000:]
    assert "workload preset agentx" in text
    man = read_manifest(out)
    assert man.status == "completed" and man.spec is not None
    wl = man.spec["workload"]
    assert wl["preset"] == "agentx" and wl["start_at"] == "time"
    assert man.config.window == (0.0, 480.0)  # the preset measures the whole run
    assert (man.config.start_at, man.config.recycle_start) == ("time", "first")
    summary = read_summary(out)
    assert summary is not None
    assert any("workload preset agentx" in n for n in summary.notes)
    assert any("below its 15-minute floor" in n for n in summary.notes)
    engines = json.loads((out / "summary.json").read_text())["engines"]
    assert set(engines) == {"vllm", "flashstate"}
    for name, e in engines.items():
        assert e["requests"] > 0, name
