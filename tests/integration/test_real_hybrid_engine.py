"""A real HYBRID engine serving our replay (issue 31): stock vLLM's CPU build serving a tiny
Qwen3-Next (Gated DeltaNet + attention) in align mode. Every request's cached tokens must equal
the ideal under vLLM's align rule (`rule_ideal_tokens`), and our emulator, configured as that
engine (configs/models/vllm-cpu-hybrid.yaml), must report the same cached tokens for the same
requests, replayed side by side in one `replay run`. And preflight must refuse the
block-size trap on a real engine: the tiny NemotronH (Mamba-2) started without --block-size
keeps states by 16-token blocks and reports 0 cached tokens for an exact resend.

Both fail, never skip, when `.venv-vllm` is missing under REPLAY_REQUIRE_VLLM=1 (scripts/test.sh).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from replay.engines.configs import load_engine_config, resolve_python
from replay.engines.launch import free_port
from replay.rundir import read_manifest, read_requests
from tests.required import missing, real_trace
from tests.serve_sim import serve_sim

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_every_request_is_the_align_rule_and_the_emulator_twin_agrees(
    vllm_hybrid: Any, tmp_path: Path
) -> None:
    corpus = tmp_path / "kvct-dev-div32.jsonl.gz"
    made = subprocess.run(
        [sys.executable, "-m", "replay", "traces", "convert", str(real_trace()), "--to", "weka",
         "--scale", "32", "--out", str(corpus)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    out = tmp_path / "run"
    profile = ROOT / "configs" / "models" / "vllm-cpu-hybrid.yaml"
    with serve_sim(["--engine", "vllm", "--model", str(profile)], tmp_path / "emulator.log") as emu:
        cmd = [sys.executable, "-m", "replay", "run", "--endpoint", f"vllm={vllm_hybrid.url}",
               "--endpoint", f"twin=vllm@{emu}", "--trace", str(corpus), "--sessions", "2",
               "--duration-min", "1", "--window", "0-1", "--warmup-s", "5", "--seed", "3",
               "--no-panel", "--out", str(out)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    man = read_manifest(out)
    real = next(e for e in man.engines if e.name == "vllm")
    assert real.hybrid is not None, real
    assert real.hybrid["mode"] == "align" and real.hybrid["attention_block"] == 256
    probe = real.hybrid["align_probe"]
    assert probe["cached"] == (probe["tokens"] - 1) // 256 * 256
    assert real.preflight is not None and real.preflight["hybrid align rule"] is True
    # The run says the corpus's scale (the trace's own); throughputs are the tiny engine's, ×1.
    assert man.trace is not None and man.trace.token_scale == 32, man.trace
    assert man.config.token_scale == 1.0

    df = read_requests(out)
    df = df[(df.status == "ok") & (df.attempt == 0)]
    mine = df[df.engine == "vllm"]
    assert len(mine) >= 6 and (~mine.priming).sum() >= 3, mine.to_string()
    assert mine.rule_ideal_tokens.notna().all()
    wrong = mine[mine.cached_tokens != mine.rule_ideal_tokens]
    assert wrong.empty, wrong[["session", "turn", "prompt_tokens", "cached_tokens",
                               "rule_ideal_tokens"]].to_string()  # fmt: skip
    assert (mine.cached_tokens > 0).sum() >= 3  # continuations did hit
    # The emulator as that engine: the same cached tokens for every request both served.
    key = ["session", "trajectory", "agent", "turn"]
    both = mine.merge(df[df.engine == "twin"], on=key, suffixes=("", "_twin"))
    assert len(both) >= 5, both.to_string()
    differ = both[both.cached_tokens != both.cached_tokens_twin]
    assert differ.empty, differ[[*key, "prompt_tokens", "cached_tokens", "cached_tokens_twin"]]


def test_preflight_refuses_the_block_size_trap_on_a_real_engine(tmp_path: Path) -> None:
    """The tiny NemotronH started without --block-size: the engine core keeps Mamba blocks of
    16 tokens and an exact resend reports 0 cached tokens; the launcher's preflight names the
    trap and the flag, and stops the server."""
    cfg = load_engine_config("vllm-cpu-mamba2")
    if not Path(resolve_python(cfg)).is_file():
        missing("the CPU vLLM engine is not installed: run `bash scripts/setup_vllm_cpu.sh`")
    data = yaml.safe_load(cfg.path.read_text())  # type: ignore[union-attr]
    args = data["serve"]["args"]
    i = args.index("--block-size")
    del args[i : i + 2]
    data["model"]["path"] = cfg.resolved_model()
    data["serve"]["env"] = cfg.resolved_env()  # the patch folder, made absolute
    data["expect"].pop("block_size", None)
    trap = tmp_path / "vllm-cpu-mamba2-trap.yaml"
    trap.write_text(yaml.safe_dump(data))
    log = tmp_path / "server.log"
    cmd = [sys.executable, "-m", "replay", "engines", "launch", str(trap), "--port",
           str(free_port()), "--log-file", str(log)]  # fmt: skip
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=900, env={**os.environ, "COLUMNS": "300"}
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text
    assert "hybrid align rule" in text and "block-size trap" in text, text
    assert "--block-size B" in text and "probably 384" in text, text
    assert "server stopped" in text, text


def test_an_unpatched_mamba2_engine_that_dies_is_named_with_its_error(tmp_path: Path) -> None:
    """The tiny NemotronH without the runtime patch (replay/engines/patches/mamba2_cpu): vLLM
    0.32's CPU Mamba-2 path dies on the first prompt longer than a block — here preflight's
    first probe. `replay run --engine-log` names the engine's own last error (the worker's
    IndexError, not the API server's EngineDeadError that points at it), sends nothing and
    writes no records; the server's process group is gone once the launcher stops it."""
    from replay.engines.launch import group_members, launched

    cfg = load_engine_config("vllm-cpu-mamba2")
    if not Path(resolve_python(cfg)).is_file():
        missing("the CPU vLLM engine is not installed: run `bash scripts/setup_vllm_cpu.sh`")
    data = yaml.safe_load(cfg.path.read_text())  # type: ignore[union-attr]
    data["model"]["path"] = cfg.resolved_model()
    env = cfg.resolved_env()
    env.pop("PYTHONPATH")  # the patch
    data["serve"]["env"] = env
    unpatched = tmp_path / "vllm-cpu-mamba2-unpatched.yaml"
    unpatched.write_text(yaml.safe_dump(data))
    log = tmp_path / "server.log"
    with launched(load_engine_config(str(unpatched)), log, port=free_port()) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "replay", "run", "--endpoint", f"vllm={server.url}",
             "--engine-log", f"vllm={log}", "--sessions", "2", "--duration-min", "1",
             "--no-panel", "--out", str(tmp_path / "run")],
            capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "300"},
        )  # fmt: skip
        pgid = server.pid
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "preflight failed" in text, text
    assert "ends with: " in text and "IndexError: index" in text, text
    assert "EngineDeadError" not in text.split("ends with: ", 1)[1].splitlines()[0], text
    assert not (tmp_path / "run" / "requests.jsonl").exists()
    assert not group_members(pgid), "engine processes left behind"
