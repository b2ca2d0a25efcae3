"""`replay run --endpoint vllm=SMG_URL --router external` end to end (issue 26): smg 1.13.0
(pinned) in front of three emulator replicas, the client sending text prompts (smg's HTTP path
refuses token ids) that the emulators' built-in tokenizer reads back into exactly the ids the
client built. Checked against the replicas' own counters: every ok record names the replica
that served it, each replica's requests and prompt tokens are its records' (plus preflight's
two probes, which go through smg too and land on one replica), cached tokens are reported, and
no smg process outlives the block; the same for SGLang, whose `/generate` smg passes
`input_ids` on. Without smg this skips, saying how to install it; under
REPLAY_REQUIRE_SMG=1 it fails. About 15 s per engine."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from replay.emulator.config import EmulatorConfig
from replay.emulator.launch import start_fleet
from replay.engines.smg import PINNED_VERSION, SmgMissing, find_smg, smg_version, start_smg
from replay.rundir import read_manifest, read_requests
from tests.required import SMG, missing

ROOT = Path(__file__).resolve().parents[2]
X = 30.0  # emulators and workload 30x faster than the modelled GPU
REPLICAS = 3


def _smg() -> str:
    try:
        exe = find_smg()
    except SmgMissing as e:
        missing(str(e), SMG)
    version = smg_version(exe)
    if version != PINNED_VERSION:
        missing(f"{exe} is smg {version}, not the pinned {PINNED_VERSION}", SMG)
    return exe


def _stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/emulator/stats", timeout=10) as resp:
        out: dict[str, Any] = json.loads(resp.read())
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# vLLM's adapter sends text under --router external; SGLang's /generate keeps input_ids (smg
# passes them on), so its prompts stay token ids.
@pytest.mark.parametrize(("engine", "prompt_form"), [("vllm", "text"), ("sglang", "token ids")])
def test_replay_run_through_smg_records_the_replica_smg_chose(
    tmp_path: Path, engine: str, prompt_form: str
) -> None:
    exe = _smg()
    out = tmp_path / "run"
    # The bundled sample is scaled by 16; so are the emulators (small blocks, short prompts).
    cfg = EmulatorConfig(engine=engine, port=0, time_scale=X, token_scale=16)
    with start_fleet([cfg], REPLICAS) as group:
        urls = group.fleet[engine]
        with start_smg(urls, "cache_aware", exe=exe) as smg:
            pids = smg.processes()
            assert pids
            cmd = [
                sys.executable, "-m", "replay", "run", "--endpoint", f"{engine}={smg.url}",
                "--router", "external", "--sessions", "6", "--duration-min", "3",
                "--window", "1-3", "--time-scale", str(X), "--warmup-s", "5", "--no-panel",
                "--out", str(out),
            ]  # fmt: skip
            run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
            stats = [_stats(u) for u in urls]
    assert not [p for p in pids if _alive(p)], "an smg process outlived start_smg"

    df = read_requests(out)
    sent = df[df.sent_s.notna()]
    ok = sent[sent.status == "ok"]
    assert len(ok) >= 10 and set(sent.status) <= {"ok", "cancelled"}, sent[["status", "error"]]
    assert (sent.router == "external").all()
    assert ok.replica.notna().all()  # every ok record names the replica smg chose
    assert set(ok.replica.astype(int)) <= set(range(REPLICAS))
    by = ok.groupby(ok.replica.astype(int))
    n_ok = by.size().reindex(range(REPLICAS), fill_value=0)
    tok_ok = by.prompt_tokens.sum().reindex(range(REPLICAS), fill_value=0)
    hit_ok = by.cached_tokens.sum().reindex(range(REPLICAS), fill_value=0)
    finished = [int(s["counters"]["requests_finished"]) for s in stats]
    aborted = [int(s["counters"]["requests_aborted"]) for s in stats]
    prompt = [int(s["counters"]["prompt_tokens"]) for s in stats]
    cached = [int(s["counters"]["cached_tokens"]) for s in stats]
    # The replicas' own counts are the ok records' plus preflight's two probes (one prompt
    # sent twice, through smg too: cache_aware's tree sends the repeat where the first went),
    # plus those of the requests the run's end cancelled that still reached a replica: the
    # replica aborted them, or finished them before it saw the client go.
    cancelled = int((sent.status == "cancelled").sum())
    extra = [finished[i] - int(n_ok[i]) for i in range(REPLICAS)]
    assert min(extra) >= 0 and 2 <= sum(extra) <= 2 + cancelled, (extra, cancelled, stats)
    assert sum(extra) + sum(aborted) <= 2 + cancelled, (extra, aborted, cancelled)
    # A replica that served no probe and no cancelled request counted exactly its records.
    busy = [int(s["running"]) + int(s["waiting"]) for s in stats]  # a cancel not yet seen
    clean = [i for i in range(REPLICAS) if extra[i] == aborted[i] == busy[i] == 0 and n_ok[i] > 0]
    assert clean, (extra, aborted, busy, n_ok.tolist())
    for i in clean:  # exact: the replica read the text as exactly the ids the client built
        assert prompt[i] == int(tok_ok[i]), (i, prompt[i], int(tok_ok[i]))
        assert cached[i] == int(hit_ok[i]), (i, cached[i], int(hit_ok[i]))
    for i in range(REPLICAS):
        assert prompt[i] >= int(tok_ok[i]) and cached[i] >= int(hit_ok[i]), i
    assert hit_ok.sum() > 0  # cached tokens are reported through smg
    assert (n_ok > 0).sum() >= 2, n_ok.tolist()  # smg spread the sessions
    entry = read_manifest(out).engines[0]
    assert entry.fleet is not None and entry.fleet["router"] == "external"
    assert entry.fleet["prompt"] == prompt_form


pytestmark = pytest.mark.slow
