"""A peer's replayer beside ours: aiperf's Weka-trace replay and `replay run` on the same small
trace against the same three emulators (flashstate, vllm, sglang), side by side.

What it does:
1. Generates a small Weka-format trace (`replay traces synth`, seeded, lengths divided by
   --scale) and keeps the first --entries entries of each trajectory (subagents whole).
2. Writes it twice: as JSON lines for `replay run`, and as one JSON file per trajectory for
   aiperf's local-file Weka loader (`--custom-dataset-type weka_trace --input-file DIR`), with
   every time (t, api_time, think_time, ttft) divided by --time-scale, since aiperf has no
   time scale of its own and its agentic-replay scenario (which would keep the recorded gaps)
   demands ≥ 900 s runs; aiperf then runs in its concurrency mode, one stream per trajectory.
3. For each tool, starts the three emulators fresh (`--time-scale` X, a character-level
   tokenizer shared with aiperf so both count tokens alike), runs the tool, and reads its
   figures: hit rate = cached / prompt tokens (ours: from the run's records, priming excluded;
   aiperf: from its per-request export), TTFT mean and median, requests and errors; beside
   them the emulator's own counters (/emulator/stats, priming requests included), which
   measure both tools alike, and each tool's idea of the ideal: ours the longest prefix any
   earlier request computed (`ideal_cached_tokens`), aiperf's `theoretical_prefix_cache_hit`
   (from the trace's hash ids). Requests still running when our run's clock ends are cut
   (`cancelled`), not errors.

Usage: .venv/bin/python scripts/bench_peers.py [--trajectories 4] [--entries 30] [--scale 10]
       [--time-scale 20] [--seed 1] [--out DIR]
Needs .venv-peers (bash scripts/setup_peers.sh) and the `tokenizers` package in .venv.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from replay.emulator.config import EmulatorConfig  # noqa: E402
from replay.emulator.launch import start_emulators  # noqa: E402
from replay.emulator.tokenizer import save_char_tokenizer  # noqa: E402
from replay.rundir import read_requests  # noqa: E402
from replay.traces.synth import SynthConfig, write_synth  # noqa: E402

ENGINES = ("flashstate", "vllm", "sglang")
PEERS_PY = ROOT / ".venv-peers" / "bin" / "python"
MODEL = "glm-5.3-flash"


def make_traces(out: Path, n: int, entries: int, scale: float, seed: int, x: float) -> int:
    """Our JSONL and aiperf's folder; returns the number of requests (subagents' included)."""
    raw = out / "synth.jsonl"
    write_synth(raw, SynthConfig(n_trajectories=n, seed=seed, scale=scale))
    ours, peer = out / "trace.jsonl", out / "weka"
    peer.mkdir(exist_ok=True)
    total = 0
    with ours.open("w") as f:
        for line in raw.read_text().splitlines():
            tr = json.loads(line)
            tr["requests"] = tr["requests"][:entries]
            total += sum(
                len(r["requests"]) if r["type"] == "subagent" else 1 for r in tr["requests"]
            )
            f.write(json.dumps(tr) + "\n")
            # aiperf's Weka model forbids extra fields: the synthesized trace's declared
            # `token_scale` (replay.traces.scale) is ours alone; aiperf counts tokens as written.
            theirs = {k: v for k, v in tr.items() if k != "token_scale"}
            (peer / f"{tr['id']}.json").write_text(json.dumps(_scaled(theirs, x)))
    return total


def _scaled(obj: Any, x: float) -> Any:
    if isinstance(obj, list):
        return [_scaled(v, x) for v in obj]
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in ("t", "api_time", "think_time", "ttft") and isinstance(v, int | float):
                out[k] = v / x
            elif k == "duration_ms" and isinstance(v, int | float):
                out[k] = int(v / x)
            else:
                out[k] = _scaled(v, x)
        return out
    return obj


def _stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/emulator/stats", timeout=10) as r:
        data: dict[str, Any] = json.loads(r.read())["counters"]
        return data


def _server(c: dict[str, Any]) -> dict[str, float]:
    return {
        "server_requests": c["requests_finished"],
        "server_hit": c["cached_tokens"] / max(c["prompt_tokens"], 1),
    }


def _configs(tok: Path, x: float) -> list[EmulatorConfig]:
    return [EmulatorConfig(engine=e, port=0, time_scale=x, tokenizer=str(tok)) for e in ENGINES]


def run_ours(out: Path, tok: Path, n: int, x: float, minutes: float) -> dict[str, dict]:
    res: dict[str, dict] = {}
    with start_emulators(_configs(tok, x)) as urls:
        run = out / "ours-run"
        cmd = [sys.executable, "-m", "replay", "run", "--trace", str(out / "trace.jsonl")]
        cmd += ["--sessions", str(n), "--duration-min", f"{minutes:g}"]
        cmd += ["--window", f"0-{minutes:g}", "--time-scale", f"{x:g}", "--no-panel"]
        cmd += ["--out", str(run)]
        for e, u in urls.items():
            cmd += ["--endpoint", f"{e}={u}"]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(ours=True))
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            raise SystemExit(f"replay run failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
        recs = read_requests(run)
        for e, u in urls.items():
            mine = recs[(recs["engine"] == e) & ~recs["priming"]]
            ok = mine[mine["status"] == "ok"]
            ttft = (ok["first_token_s"] - ok["sent_s"]).to_numpy() * 1000
            prompt = max(ok["prompt_tokens"].sum(), 1)
            res[e] = {
                "requests": len(mine),
                "errors": int((~mine["status"].isin(["ok", "cancelled"])).sum()),
                "cancelled": int((mine["status"] == "cancelled").sum()),
                "hit": ok["cached_tokens"].fillna(0).sum() / prompt,
                "ideal": ok["ideal_cached_tokens"].sum() / prompt,
                "ttft_mean_ms": float(np.mean(ttft)),
                "ttft_p50_ms": float(np.median(ttft)),
                "wall_s": wall,
                **_server(_stats(u)),
            }
    return res


def run_aiperf(out: Path, tok: Path, n: int, total: int, x: float) -> dict[str, dict]:
    res: dict[str, dict] = {}
    with start_emulators(_configs(tok, x)) as urls:
        for e, u in urls.items():
            art = out / f"aiperf-{e}"
            cmd = [str(PEERS_PY), "-m", "aiperf", "profile", "--model", MODEL, "--url", u]
            cmd += ["--endpoint-type", "chat", "--streaming", "--tokenizer", str(tok)]
            cmd += ["--custom-dataset-type", "weka_trace", "--input-file", str(out / "weka")]
            cmd += ["--concurrency", str(n), "--request-count", str(total)]
            cmd += ["--extra-inputs", "ignore_eos:true", "--ui-type", "none"]
            cmd += ["--random-seed", "1", "--artifact-dir", str(art), "--workers-max", "2"]
            cmd += ["--record-processor-service-count", "1"]
            t0 = time.monotonic()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(ours=False))
            wall = time.monotonic() - t0
            if proc.returncode != 0:
                raise SystemExit(f"aiperf failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
            summary = json.loads((art / "profile_export_aiperf.json").read_text())
            ideal = summary.get("theoretical_prefix_cache_hit", {}).get("avg", float("nan"))
            res[e] = {**_aiperf_figures(art), "ideal": ideal / 100, "wall_s": wall}
            res[e] |= _server(_stats(u))
    return res


def aiperf_records(art: Path) -> tuple[dict[str, float], np.ndarray]:
    """aiperf's per-request export (`profile_export.jsonl`) read alike by every script: the
    counts (requests of the profiling phase, `priming`: those of another phase, such as
    AgentX's warm-up, `errors`), the hit rate (cached / prompt tokens of the requests without
    error) and those requests' TTFTs in ms."""
    prompt = cached = 0.0
    n = errors = warm = 0
    ttft: list[float] = []
    for line in (art / "profile_export.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("metadata", {}).get("benchmark_phase") not in (None, "profiling"):
            warm += 1
            continue
        m = rec.get("metrics", {})
        n += 1
        if rec.get("error"):
            errors += 1
            continue
        prompt += _val(m, "usage_prompt_tokens")
        cached += _val(m, "usage_prompt_cache_read_tokens")
        if "time_to_first_token" in m:
            ttft.append(_val(m, "time_to_first_token"))
    counts = {"requests": n, "priming": warm, "errors": errors, "hit": cached / max(prompt, 1.0)}
    return counts, np.asarray(ttft, dtype=float)


def _aiperf_figures(art: Path) -> dict[str, float]:
    counts, ttft = aiperf_records(art)
    return {
        "requests": counts["requests"],
        "errors": counts["errors"],
        "cancelled": 0,
        "hit": counts["hit"],
        "ttft_mean_ms": float(np.mean(ttft)) if len(ttft) else float("nan"),
        "ttft_p50_ms": float(np.median(ttft)) if len(ttft) else float("nan"),
    }


def _val(metrics: dict[str, Any], key: str) -> float:
    v = metrics.get(key)
    if isinstance(v, dict):
        v = v.get("value")
    return float(v or 0)


def _env(ours: bool) -> dict[str, str]:
    env = dict(os.environ)
    if ours:
        env["PYTHONPATH"] = str(ROOT)
    else:
        env.pop("PYTHONPATH", None)
    return env | {"NO_COLOR": "1", "COLUMNS": "200"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trajectories", type=int, default=4)
    ap.add_argument("--entries", type=int, default=30, help="entries kept per trajectory")
    ap.add_argument("--scale", type=float, default=10.0, help="divide token lengths by this")
    ap.add_argument("--time-scale", type=float, default=20.0)
    ap.add_argument("--minutes", type=float, default=10.0, help="our run's trace-clock length")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if not PEERS_PY.is_file():
        raise SystemExit(f"{PEERS_PY} is missing: run `bash scripts/setup_peers.sh`")
    out = a.out or Path(tempfile.mkdtemp(prefix="bench-peers-"))
    out.mkdir(parents=True, exist_ok=True)
    tok = save_char_tokenizer(out / "char-tokenizer")
    total = make_traces(out, a.trajectories, a.entries, a.scale, a.seed, a.time_scale)
    print(f"trace: {a.trajectories} trajectories, {total} requests (subagents' included), "
          f"lengths / {a.scale:g}, time scale {a.time_scale:g}; artifacts in {out}")  # fmt: skip
    ours = run_ours(out, tok, a.trajectories, a.time_scale, a.minutes)
    peer = run_aiperf(out, tok, a.trajectories, total, a.time_scale)
    (out / "results.json").write_text(json.dumps({"ours": ours, "aiperf": peer}, indent=1))
    print(
        "| engine | tool | requests (errors, cut at end) | hit rate | ideal hit | "
        "server hit rate | TTFT mean ms | TTFT p50 ms | wall s |"
    )
    print("|" + "---|" * 9)
    for e in ENGINES:
        for name, r in (("replay run", ours[e]), ("aiperf weka_trace", peer[e])):
            print(
                f"| {e} | {name} | {r['requests']} ({r['errors']}, {r['cancelled']}) | "
                f"{r['hit']:.1%} | {r['ideal']:.1%} | {r['server_hit']:.1%} | "
                f"{r['ttft_mean_ms']:.0f} | {r['ttft_p50_ms']:.0f} | "
                f"{r['wall_s']:.0f} |"
            )


if __name__ == "__main__":
    main()
