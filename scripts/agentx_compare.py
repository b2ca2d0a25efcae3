"""Our replay with `--preset agentx` beside aiperf's own `--scenario inferencex-agentx-mvp`
(issue 35, point 1), on the same emulators and the same corpus, scaled down alike; prints the
table of docs/field-numbers.md ("AgentX preset and aiperf").

What it does:
1. Takes the first --trajectories trajectories of the trace (default: the bundled Weka sample,
   token lengths 1/16 of the corpus's) and writes them twice: as JSON lines for `replay run`,
   and as one JSON file per trajectory for aiperf's Weka loader (`--custom-dataset-type
   weka_trace`), every recorded time divided by --time-scale (aiperf has no time scale of its
   own) and without the `token_scale` key (aiperf's Weka schema refuses it).
2. Scales both runs down alike: the preset's 30-minute profile (aiperf's 1,800 s default)
   divided by --time-scale, on emulators running --time-scale times faster than the modelled
   GPUs; --sessions lanes for both (`--sessions` / `--concurrency`). aiperf runs under its
   scenario with `--unsafe-override`, since a scaled-down profile is below its 900 s floor and
   its 10 s system idle cap is scaled too (`--system-idle-gap-cap-seconds 10/X`); it stamps
   the run `submission_valid=false`, as it should.
3. Starts the emulators fresh for each tool (a character-level tokenizer shared with aiperf so
   both count tokens alike) and reads each tool's figures from its own records: requests
   measured (ours: every request of the run but the priming ones; aiperf: its profiling
   phase) and the priming requests beside them (ours: priming; aiperf: its warm-up phase),
   errors, hit rate = cached / prompt tokens, TTFT p50 / p90 (wall milliseconds at the
   client, against emulators X times faster than the modelled GPUs), and the emulator's own
   counters (everything it served, primings included).

aiperf 0.13.0's system idle cap calls `Handle.when()` on uvloop's handles, which a zero-delay
timer lacks (`common/loop_scheduler.py:323`: an AttributeError per credit return under
uvloop), so aiperf runs with AIPERF_SERVICE_DISABLE_UVLOOP=true (the standard asyncio loop).

Usage: .venv/bin/python scripts/agentx_compare.py [--trajectories 8] [--sessions 8]
       [--time-scale 30] [--engines flashstate,vllm,sglang] [--trace PATH] [--out DIR]
       [--lifted-cap-engines vllm]  (aiperf again with its system idle cap lifted, the one
       timing rule our replay does not apply, and its phase starts burst: `run_aiperf`)
Needs .venv-peers (bash scripts/setup_peers.sh) and the `tokenizers` package in .venv.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_peers import (  # noqa: E402
    MODEL,
    PEERS_PY,
    _env,
    _scaled,
    _server,
    _stats,
    aiperf_records,
)

from replay.emulator.config import EmulatorConfig  # noqa: E402
from replay.emulator.launch import start_emulators  # noqa: E402
from replay.emulator.tokenizer import save_char_tokenizer  # noqa: E402
from replay.presets import AGENTX, NO_GAP_CAP_S  # noqa: E402
from replay.rundir import read_manifest, read_requests  # noqa: E402
from replay.traces import sample_path  # noqa: E402

SCENARIO = "inferencex-agentx-mvp"
SYSTEM_IDLE_CAP_S = 10.0  # aiperf common/scenario/inferencex_agentx_mvp.py:36


def make_traces(src: Path, out: Path, k: int, x: float) -> int:
    """Our JSONL and aiperf's folder from the first `k` trajectories; returns their requests
    (subagents' included)."""
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt") as f:
        lines = [line for line in (next(f, "") for _ in range(k)) if line.strip()]
    ours, peer = out / "trace.jsonl", out / "weka"
    peer.mkdir(exist_ok=True)
    total = 0
    with ours.open("w") as f:
        for line in lines:
            tr = json.loads(line)
            f.write(json.dumps(tr) + "\n")
            total += sum(
                len(r["requests"]) if r["type"] == "subagent" else 1 for r in tr["requests"]
            )
            tr.pop("token_scale", None)
            (peer / f"{tr['id']}.json").write_text(json.dumps(_scaled(tr, x)))
    return total


def _configs(tok: Path, x: float, engines: list[str]) -> list[EmulatorConfig]:
    return [EmulatorConfig(engine=e, port=0, time_scale=x, tokenizer=str(tok)) for e in engines]


def _pcts(ttft_ms: np.ndarray) -> dict[str, float]:
    if not len(ttft_ms):
        return {"ttft_p50_ms": float("nan"), "ttft_p90_ms": float("nan")}
    return {
        "ttft_p50_ms": float(np.percentile(ttft_ms, 50)),
        "ttft_p90_ms": float(np.percentile(ttft_ms, 90)),
    }


def run_ours(out: Path, tok: Path, a: argparse.Namespace, engines: list[str]) -> dict[str, dict]:
    res: dict[str, dict] = {}
    x = a.time_scale
    with start_emulators(_configs(tok, x, engines)) as urls:
        run = out / "ours-run"
        cmd = [sys.executable, "-m", "replay", "run", "--preset", "agentx"]
        cmd += ["--trace", str(out / "trace.jsonl"), "--sessions", str(a.sessions)]
        cmd += ["--time-scale", f"{x:g}", "--seed", str(a.seed), "--no-panel"]
        cmd += ["--band-seeds", "0", "--out", str(run)]
        for e, u in urls.items():
            cmd += ["--endpoint", f"{e}={u}"]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(ours=True))
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            raise SystemExit(f"replay run failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
        recs = read_requests(run)
        clock = read_manifest(run).config.clock_scale or 1.0  # records' s per wall s
        for e, u in urls.items():
            mine = recs[recs["engine"] == e]
            measured = mine[~mine["priming"]]
            ok = measured[measured["status"] == "ok"]
            ttft = (ok["first_token_s"] - ok["sent_s"]).to_numpy() / clock * 1000
            prompt = max(float(ok["prompt_tokens"].sum()), 1.0)
            res[e] = {
                "requests": len(measured),
                "priming": int(mine["priming"].sum()),
                "errors": int((~measured["status"].isin(["ok", "cancelled"])).sum()),
                "hit": float(ok["cached_tokens"].fillna(0).sum()) / prompt,
                **_pcts(ttft),
                "wall_s": wall,
                **_server(_stats(u)),
            }
    return res


def run_aiperf(
    out: Path, tok: Path, a: argparse.Namespace, engines: list[str], idle_cap: bool = True
) -> dict[str, dict]:
    """aiperf's scenario on each engine; `idle_cap` False lifts its system idle cap (the one
    timing rule our replay does not apply) to see what it does. Its warm-up spreads the
    priming requests so that every trajectory reaches t* together; without the idle cap that
    spread is the longest recorded lead (54 minutes of wall time on the sample's first 8
    trajectories at 30x), so the lifted run fires them at once (`--burst-phase-starts`, which
    also starts each lane's first profiled request at once)."""
    res: dict[str, dict] = {}
    x = a.time_scale
    cap_s = SYSTEM_IDLE_CAP_S / x if idle_cap else NO_GAP_CAP_S
    duration_s = float(AGENTX.values["duration_min"]) * 60 / x  # type: ignore[arg-type]
    env = _env(ours=False) | {"AIPERF_SERVICE_DISABLE_UVLOOP": "true"}
    with start_emulators(_configs(tok, x, engines)) as urls:
        for e, u in urls.items():
            art = out / (f"aiperf-{e}" if idle_cap else f"aiperf-{e}-no-idle-cap")
            cmd = [str(PEERS_PY), "-m", "aiperf", "profile", "--model", MODEL, "--url", u]
            cmd += ["--endpoint-type", "chat", "--streaming", "--tokenizer", str(tok)]
            cmd += ["--custom-dataset-type", "weka_trace", "--input-file", str(out / "weka")]
            cmd += ["--scenario", SCENARIO, "--unsafe-override"]
            cmd += ["--concurrency", str(a.sessions), "--benchmark-duration", f"{duration_s:g}"]
            cmd += ["--system-idle-gap-cap-seconds", f"{cap_s:.4g}"]
            if not idle_cap:
                cmd += ["--burst-phase-starts"]
            cmd += ["--ui-type", "none", "--random-seed", str(a.seed), "--artifact-dir", str(art)]
            cmd += ["--workers-max", "2", "--record-processor-service-count", "1"]
            t0 = time.monotonic()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            wall = time.monotonic() - t0
            if proc.returncode != 0:
                raise SystemExit(f"aiperf failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
            res[e] = {**_aiperf_figures(art), "wall_s": wall, **_server(_stats(u))}
    return res


def _aiperf_figures(art: Path) -> dict[str, float]:
    counts, ttft = aiperf_records(art)
    return {**counts, **_pcts(ttft)}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=None, help="a Weka JSONL (default: sample)")
    ap.add_argument("--trajectories", type=int, default=8, help="the first K trajectories")
    ap.add_argument("--sessions", type=int, default=8, help="lanes: --sessions / --concurrency")
    ap.add_argument("--time-scale", type=float, default=30.0)
    ap.add_argument("--engines", default="flashstate,vllm,sglang")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--lifted-cap-engines",
        default="",
        help="also run aiperf with its system idle cap lifted on these engines (comma list)",
    )
    a = ap.parse_args()
    if not PEERS_PY.is_file():
        raise SystemExit(f"{PEERS_PY} is missing: run `bash scripts/setup_peers.sh`")
    engines = [e.strip() for e in a.engines.split(",") if e.strip()]
    out = a.out or Path(tempfile.mkdtemp(prefix="agentx-compare-"))
    out.mkdir(parents=True, exist_ok=True)
    tok = save_char_tokenizer(out / "char-tokenizer")
    src = a.trace or sample_path()
    total = make_traces(src, out, a.trajectories, a.time_scale)
    minutes = float(AGENTX.values["duration_min"])  # type: ignore[arg-type]
    print(
        f"corpus: the first {a.trajectories} trajectories of {src.name} ({total} requests, "
        f"subagents' included); {a.sessions} lanes; the {minutes:g}-minute profile and every "
        f"recorded time / {a.time_scale:g}; artifacts in {out}"
    )
    ours = run_ours(out, tok, a, engines)
    peer = run_aiperf(out, tok, a, engines)
    lifted_on = [e.strip() for e in a.lifted_cap_engines.split(",") if e.strip()]
    lifted = run_aiperf(out, tok, a, lifted_on, idle_cap=False) if lifted_on else {}
    (out / "results.json").write_text(
        json.dumps({"ours": ours, "aiperf": peer, "aiperf_no_idle_cap": lifted}, indent=1)
    )
    print(
        "| engine | tool | requests measured (priming, errors) | hit rate | TTFT p50 ms | "
        "TTFT p90 ms | server: requests, hit rate | wall s |"
    )
    print("|" + "---|" * 8)
    for e in engines:
        rows = [("replay --preset agentx", ours[e]), (f"aiperf {SCENARIO}", peer[e])]
        if e in lifted:
            rows.append((f"aiperf {SCENARIO}, system idle cap lifted", lifted[e]))
        for name, r in rows:
            print(
                f"| {e} | {name} | {r['requests']} ({r['priming']}, {r['errors']}) | "
                f"{r['hit']:.1%} | {r['ttft_p50_ms']:.0f} | {r['ttft_p90_ms']:.0f} | "
                f"{r['server_requests']}, {r['server_hit']:.1%} | {r['wall_s']:.0f} |"
            )


if __name__ == "__main__":
    main()
