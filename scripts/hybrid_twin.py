"""A real hybrid engine against our engine model, request by request and across the cliff
(issue 31; docs/real-hybrid-engine.md).

    .venv/bin/python scripts/hybrid_twin.py                       # the defaults below, ~25 min
    .venv/bin/python scripts/hybrid_twin.py --sessions 2,8 --seeds 1 --minutes 1   # a quick look

What it does, on one real engine it starts (`--engine`, default `vllm-cpu-hybrid`: stock vLLM's
CPU build serving a tiny Qwen3-Next in align mode), its pool set to `--blocks` blocks
(`--num-gpu-blocks-override`) so that a handful of sessions exceed it:
1. The corpus: `--trace` (default the real kvct-dev corpus) with token lengths divided by
   `--scale` (`replay traces convert --scale`), written for the engine as it is: the tiny
   engine serves these lengths, it stands for no bigger one, so the file declares no
   token_scale and every run passes `--token-scale 1`; the file's name says the divisor.
2. Light load (`--light-sessions`, no eviction): a live `replay run` against the real engine;
   every request's cached tokens must equal `rule_ideal_tokens`, the ideal under vLLM's align
   rule (replay.client.ideal.AlignRuleIndex).
3. The clock, fitted on that light run only: TTFT against uncached prompt tokens (least
   squares: seconds per token D, intercept) and the median inter-token time (one decode
   step). Written into a copy of the model profile (`configs/models/vllm-cpu-hybrid.yaml`)
   with the engine's pool.
4. The twin at light load: our emulator (`replay serve-sim --engine vllm`, that profile)
   under the same live replay, and the simulator's `vllm` and `vllm-native` (vLLM's own
   KVCacheManager) policies on the engine clock: cached tokens compared request by request.
5. The sweep: each `--sessions` point and seed, the real engine and the simulator's `vllm`
   on the fitted clock: window hit rate, TTFT p50/p90, output tokens per minute, the real
   engine's mean waiting queue, and the share of requests whose cached tokens agree.

Printed last: one line per sweep point, then
    cliff real N model M; agreement light X heavy Y
where the cliff is the first session count whose hit rate (mean over seeds) is below half of
the lightest point's, and agreement is the share of requests (matched by session, trajectory,
agent, turn) whose cached tokens are equal, model (`vllm`, engine timing) against the real
engine: light at `--light-sessions`, heavy at the largest sweep point. `--json FILE` keeps
every figure. Every process it starts is stopped when it ends (Ctrl-C included).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from replay.engines.configs import EngineConfigError, load_engine_config  # noqa: E402
from replay.engines.launch import LaunchError, free_port, launched  # noqa: E402
from replay.rundir import read_requests  # noqa: E402

KEY = ["session", "trajectory", "agent", "turn"]
PROFILE = ROOT / "configs" / "models" / "vllm-cpu-hybrid.yaml"
DEFAULT_TRACE = ROOT.parent / "shared" / "traces" / "kvct-dev.jsonl.gz"


class TwinError(Exception):
    """A bad flag or a step that failed; the message says which and what to do."""


# ---- inputs --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", default="vllm-cpu-hybrid", help="engine config (name or YAML)")
    p.add_argument("--trace", default=str(DEFAULT_TRACE), help="Weka trace (default kvct-dev)")
    p.add_argument("--scale", type=int, default=32, help="divide token lengths by this (32)")
    p.add_argument("--blocks", type=int, default=160, help="the engine's pool in blocks (160)")
    p.add_argument("--light-sessions", type=int, default=2, help="sessions of the light run (2)")
    p.add_argument("--sessions", default="2,4,8,12", help="sweep points, e.g. 2,4,8,12")
    p.add_argument("--seeds", type=int, default=2, help="seeds per sweep point (2)")
    p.add_argument("--minutes", type=float, default=2.0, help="minutes per run (2)")
    p.add_argument("--warmup-s", type=float, default=20.0, help="session start spread (20 s)")
    p.add_argument("--out", default=str(ROOT / "runs" / "hybrid-twin"), help="output folder")
    p.add_argument("--json", default=None, help="also write every figure to this file")
    a = p.parse_args(argv)
    try:
        a.sweep = sorted({int(x) for x in str(a.sessions).split(",") if x.strip()})
    except ValueError:
        raise TwinError(f"--sessions {a.sessions!r}: expected whole numbers, e.g. 2,4,8") from None
    if not a.sweep or min(a.sweep) < 1:
        raise TwinError(f"--sessions {a.sessions!r}: expected session counts of at least 1")
    for flag, v, lo in (
        ("--scale", a.scale, 1),
        ("--seeds", a.seeds, 1),
        ("--light-sessions", a.light_sessions, 1),
        ("--blocks", a.blocks, 70),
    ):
        if v < lo:
            why = " (one 16,384-token request needs 64 blocks and its states)" if lo == 70 else ""
            raise TwinError(f"{flag} {v}: expected at least {lo}{why}")
    if not (math.isfinite(a.minutes) and a.minutes > 0):
        raise TwinError(f"--minutes {a.minutes}: expected a positive number of minutes")
    if not Path(a.trace).is_file():
        raise TwinError(f"--trace {a.trace}: no such file (a Weka .jsonl or .jsonl.gz)")
    try:
        a.config = load_engine_config(a.engine)
    except EngineConfigError as e:
        raise TwinError(f"--engine: {e}") from None
    return a


def engine_corpus(trace: str, scale: int) -> Path:
    """`trace` with lengths ÷ `scale`, for the tiny engine as it is (no token_scale declared)."""
    from replay.traces import load_trace
    from replay.traces.convert import write_weka
    from replay.traces.scale import scale_trace

    out = ROOT / ".corpus" / f"{Path(trace).name.split('.')[0]}-engine-div{scale}.jsonl.gz"
    if out.exists() and out.stat().st_mtime >= Path(trace).stat().st_mtime:
        return out
    scaled = scale_trace(load_trace(trace), scale)
    for tr in scaled.walk():
        tr.meta.pop("token_scale", None)  # the engine serves these lengths as they are
    out.parent.mkdir(parents=True, exist_ok=True)
    write_weka(scaled, out)
    return out


# ---- running -------------------------------------------------------------------------------


def replay_run(
    url: str, corpus: Path, sessions: int, seed: int, a: argparse.Namespace, out: Path
) -> Path:
    """One live `replay run` (the command a user types) against `url`."""
    m = f"{a.minutes:g}"
    cmd = [sys.executable, "-m", "replay", "run", "--endpoint", f"vllm={url}", "--trace",
           str(corpus), "--token-scale", "1", "--sessions", str(sessions), "--duration-min", m,
           "--window", f"0-{m}", "--warmup-s", f"{a.warmup_s:g}", "--seed", str(seed),
           "--no-panel", "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    if proc.returncode != 0 or not (out / "requests.parquet").exists():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise TwinError(f"replay run ({out.name}) failed with {proc.returncode}:\n{tail}")
    return out


def simulate(corpus: Path, profile: Path, policies: str, sessions: list[int], seeds: int,
             blocks: int, a: argparse.Namespace, out: Path) -> Path:  # fmt: skip
    m = f"{a.minutes:g}"
    cmd = [sys.executable, "-m", "replay", "simulate", "--trace", str(corpus), "--token-scale",
           "1", "--policies", policies, "--sessions", ",".join(map(str, sessions)), "--seeds",
           str(seeds), "--seed", "0", "--model", str(profile), "--capacity-blocks", str(blocks),
           "--timing", "engine", "--duration-min", m, "--window", f"0-{m}", "--warmup-s",
           f"{a.warmup_s:g}", "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise TwinError(f"replay simulate failed with {proc.returncode}:\n{tail}")
    return out


@contextlib.contextmanager
def emulator(profile: Path, log: Path) -> Iterator[str]:
    """`replay serve-sim --engine vllm` on the fitted profile, stopped on exit."""
    port = free_port()
    cmd = [sys.executable, "-m", "replay", "serve-sim", "--engine", "vllm", "--model",
           str(profile), "--port", str(port), "--served-model-name", "tiny-qwen3-next"]  # fmt: skip
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise TwinError(f"the emulator exited ({proc.returncode}); log {log}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(url + "/health", timeout=2) as r,
            ):
                if r.status == 200:
                    break
            time.sleep(0.5)
        else:
            raise TwinError(f"the emulator did not answer /health in 120 s; log {log}")
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


# ---- figures -------------------------------------------------------------------------------


def ok_requests(run: Path) -> pd.DataFrame:
    df = read_requests(run)
    return df[(df.status == "ok") & (df.attempt == 0)].copy()


def exactness(df: pd.DataFrame) -> tuple[int, int]:
    """(requests whose cached tokens equal the align rule's ideal, requests)."""
    have = df[df.rule_ideal_tokens.notna()]
    return int((have.cached_tokens == have.rule_ideal_tokens).sum()), len(have)


def agreement(a: pd.DataFrame, b: pd.DataFrame) -> tuple[float, int]:
    """Share of the requests both ran (matched by KEY) whose cached tokens are equal."""
    m = a[[*KEY, "cached_tokens"]].merge(b[[*KEY, "cached_tokens"]], on=KEY, suffixes=("_a", "_b"))
    if m.empty:
        return float("nan"), 0
    return float((m.cached_tokens_a == m.cached_tokens_b).mean()), len(m)


def fit_clock(df: pd.DataFrame) -> dict[str, float]:
    """The step clock from a light run: TTFT = intercept + D · uncached tokens (least
    squares), one decode step = the median inter-token time."""
    d = df[df.first_token_s.notna() & df.sent_s.notna()]
    ttft = (d.first_token_s - d.sent_s).to_numpy(float)
    new = (d.prompt_tokens - d.cached_tokens.fillna(0)).to_numpy(float)
    if len(d) < 3 or np.ptp(new) <= 0:
        raise TwinError("the light run has too few requests to fit the clock: raise --minutes")
    slope, intercept = np.polyfit(new, ttft, 1)
    dec = d[d.output_tokens > 1]
    itl = ((dec.done_s - dec.first_token_s) / (dec.output_tokens - 1)).to_numpy(float)
    step = float(np.median(itl)) if len(itl) else float(intercept)
    return {"prefill_s_per_token": float(slope), "ttft_intercept_s": float(intercept),
            "decode_s_per_step": step, "requests": float(len(d))}  # fmt: skip


def fitted_profile(clock: dict[str, float], blocks: int, out: Path) -> Path:
    data = yaml.safe_load(PROFILE.read_text())
    data["blocks_per_engine"] = blocks
    data["prefill_cost_d"] = max(clock["prefill_s_per_token"], 1e-9)
    data["prefill_cost_e"] = 0.0
    data["clock_prefill_scale"] = 1.0
    data["decode_s_per_step"] = max(clock["decode_s_per_step"], 1e-4)
    data["decode_s_per_seq"] = 0.0
    data["source"] = (
        f"{data.get('source', '')}; this copy: pool {blocks} blocks, clock fitted by "
        f"scripts/hybrid_twin.py on {int(clock['requests'])} light-load requests"
    )
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def summary_row(run: Path) -> dict[str, Any]:
    s = json.loads((run / "summary.json").read_text())
    (e,) = s["engines"].values()
    return {k: e.get(k) for k in ("hit_rate", "ttft_p50", "ttft_p90", "output_tokens_per_min",
                                  "requests", "saturated")}  # fmt: skip


def mean_waiting(run: Path) -> float | None:
    path = run / "server_metrics.parquet"
    if not path.exists():
        return None
    m = pd.read_parquet(path)
    w = m[m.metric == "vllm:num_requests_waiting"]
    return float(w.value.mean()) if len(w) else None


def cliff(points: dict[int, float]) -> int | None:
    """The first session count whose hit rate is below half of the lightest point's."""
    xs = sorted(points)
    if not xs or not points[xs[0]] or not math.isfinite(points[xs[0]]):
        return None
    base = points[xs[0]]
    return next((x for x in xs[1:] if points[x] < base / 2), None)


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{100 * v:.1f}%" if pct else f"{v:.2f}"


# ---- the run -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    try:
        a = parse_args(argv)
    except TwinError as e:
        print(f"hybrid_twin: {e}", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _run(a, out)
    except (TwinError, LaunchError) as e:
        print(f"hybrid_twin: {e}", file=sys.stderr)
        return 1


def _run(a: argparse.Namespace, out: Path) -> int:
    t0 = time.monotonic()
    corpus = engine_corpus(a.trace, a.scale)
    print(f"corpus {corpus.name}: {a.trace} with token lengths ÷ {a.scale}", flush=True)
    cfg = a.config
    args = [*cfg.serve.args, "--num-gpu-blocks-override", str(a.blocks)]
    cfg = cfg.model_copy(update={"serve": cfg.serve.model_copy(update={"args": args})})
    report: dict[str, Any] = {"engine": cfg.name, "blocks": a.blocks, "scale": a.scale}
    with launched(cfg, out / "engine.log", port=free_port()) as server:
        print(f"engine {cfg.name} up at {server.url} ({a.blocks} blocks)", flush=True)
        light = ok_requests(
            replay_run(server.url, corpus, a.light_sessions, 0, a, out / "real-light")
        )
        eq, n = exactness(light)
        report["light_exact"] = [eq, n]
        print(
            f"light load ({a.light_sessions} sessions): cached = align-rule ideal on {eq} of {n}",
            flush=True,
        )
        clock = fit_clock(light)
        report["clock"] = clock
        print(
            f"clock (light load only): {1e6 * clock['prefill_s_per_token']:.0f} µs per prefilled "
            f"token (+{clock['ttft_intercept_s']:.3f} s), {1e3 * clock['decode_s_per_step']:.1f} ms "
            "per decode step",
            flush=True,
        )
        # The pool less vLLM's null block.
        profile = fitted_profile(clock, a.blocks - 1, out / "profile.yaml")
        with emulator(profile, out / "emulator.log") as url:
            emu = ok_requests(replay_run(url, corpus, a.light_sessions, 0, a, out / "emu-light"))
        sims = simulate(corpus, profile, "vllm,vllm-native", [a.light_sessions], 1, a.blocks - 1,
                        a, out / "sim-light")  # fmt: skip
        twin = {"emulator": agreement(emu, light)}
        for pol in ("vllm", "vllm-native"):
            twin[pol] = agreement(ok_requests(sims / f"{pol}-s{a.light_sessions}-seed0"), light)
        report["twin_light"] = twin
        for k, (share, m) in twin.items():
            print(
                f"twin at light load: {k} agrees with the real engine on {_fmt(share, True)} of {m}"
            )
        real: dict[tuple[int, int], Path] = {}
        for s in range(a.seeds):
            for n_s in a.sweep:
                real[(n_s, s)] = replay_run(
                    server.url, corpus, n_s, s, a, out / f"real-n{n_s}-seed{s}"
                )
                print(
                    f"  real {n_s} sessions seed {s} done ({time.monotonic() - t0:.0f} s)",
                    flush=True,
                )
    sim = simulate(corpus, profile, "vllm", a.sweep, a.seeds, a.blocks - 1, a, out / "sim-sweep")
    rows = []
    for n_s in a.sweep:
        r_rows = [summary_row(real[(n_s, s)]) for s in range(a.seeds)]
        m_rows = [summary_row(sim / f"vllm-s{n_s}-seed{s}") for s in range(a.seeds)]
        agree = [agreement(ok_requests(sim / f"vllm-s{n_s}-seed{s}"), ok_requests(real[(n_s, s)]))
                 for s in range(a.seeds)]  # fmt: skip
        waits = [w for s in range(a.seeds) if (w := mean_waiting(real[(n_s, s)])) is not None]
        rows.append(_point(n_s, r_rows, m_rows, agree, waits))
    report["sweep"] = rows
    c_real = cliff({r["sessions"]: r["real_hit"] for r in rows})
    c_model = cliff({r["sessions"]: r["model_hit"] for r in rows})
    light_share = twin["vllm"][0]
    heavy_share = rows[-1]["agreement"]
    report.update(cliff_real=c_real, cliff_model=c_model, agreement_light=light_share,
                  agreement_heavy=heavy_share)  # fmt: skip
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=2, default=str))
    print(f"\nsweep ({a.seeds} seed(s), {a.minutes:g} min each; real / model, ± the seed range):")
    for r in rows:
        print(
            f"{r['sessions']:>3} sessions: hit {_fmt(r['real_hit'], True)} / {_fmt(r['model_hit'], True)}"
            f" (±{100 * r['real_hit_band']:.1f} / ±{100 * r['model_hit_band']:.1f})"
            f"  TTFT p50 {_fmt(r['real_ttft_p50'])} / {_fmt(r['model_ttft_p50'])} s"
            f"  p90 {_fmt(r['real_ttft_p90'])} / {_fmt(r['model_ttft_p90'])} s"
            f"  out {r['real_out_per_min']:.0f} / {r['model_out_per_min']:.0f} tok/min"
            f"  waiting {_fmt(r['real_waiting'])}  agree {_fmt(r['agreement'], True)}"
        )
    print(
        f"cliff real {c_real if c_real is not None else 'none'} model "
        f"{c_model if c_model is not None else 'none'}; agreement light {_fmt(light_share, True)} "
        f"heavy {_fmt(heavy_share, True)}"
    )
    return 0


def _mean(xs: list[Any]) -> float:
    v = [float(x) for x in xs if x is not None and math.isfinite(float(x))]
    return float(np.mean(v)) if v else float("nan")


def _band(xs: list[Any]) -> float:
    v = [float(x) for x in xs if x is not None and math.isfinite(float(x))]
    return (max(v) - min(v)) / 2 if len(v) > 1 else 0.0


def _point(n: int, real: list[dict[str, Any]], model: list[dict[str, Any]],
           agree: list[tuple[float, int]], waits: list[float]) -> dict[str, Any]:  # fmt: skip
    matched = sum(m for _, m in agree)
    share = sum(s * m for s, m in agree if m) / matched if matched else float("nan")
    return {
        "sessions": n,
        "real_hit": _mean([r["hit_rate"] for r in real]),
        "model_hit": _mean([r["hit_rate"] for r in model]),
        "real_hit_band": _band([r["hit_rate"] for r in real]),
        "model_hit_band": _band([r["hit_rate"] for r in model]),
        "real_ttft_p50": _mean([r["ttft_p50"] for r in real]),
        "model_ttft_p50": _mean([r["ttft_p50"] for r in model]),
        "real_ttft_p90": _mean([r["ttft_p90"] for r in real]),
        "model_ttft_p90": _mean([r["ttft_p90"] for r in model]),
        "real_out_per_min": _mean([r["output_tokens_per_min"] for r in real]),
        "model_out_per_min": _mean([r["output_tokens_per_min"] for r in model]),
        "real_waiting": _mean(waits) if waits else None,
        "agreement": share,
        "matched": matched,
    }


if __name__ == "__main__":
    sys.exit(main())
