"""Experiment: the source's Table 4 (512 GiB host cache, GLM-5.3-Flash) on the simulator
(issue 34, point 6).

The source's setting (seed document, "The rest of the evidence"): FlashState + host memory
against vLLM + Mooncake and SGLang + HiCache, 512 GiB of host cache, GLM-5.3-Flash with MTP,
49 loads; at 80 sessions 172.8K / 122.2K / 126.9K output tokens per minute and p90 TTFT
7.18 / 21.88 / 22.97 s, FlashState 2.1-41.4% above vLLM across the loads, SGLang + HiCache's
p90 TTFT lower at 32-48 sessions. Here: `replay.sim` with engine timing and the replay
rules' defaults (minutes 15-45 of 45, the GLM-5.3-Flash profile's 2,531-block GPU cache,
as `replay simulate --timing engine` and scripts/bench_default.py --sim run them), each
policy with `--host-memory-gb 512`. What stands in for each system (docs/cache-tiers.md):

- FlashState + host memory: policy `flashstate` with vLLM's connector rules for the tier;
- vLLM + Mooncake: policy `vllm` with vLLM's native offloading connector's host tier (one
  pool of 512 GiB in host memory, the connector's rules), not Mooncake's own store;
- SGLang + HiCache: policy `sglang` with HiCache's host KV and Mamba pools.

MTP is not modelled (the engine model has one token per sequence per decode step).

    .venv/bin/python experiments/table4_host.py                     # loads 32-80, seed 0
    .venv/bin/python experiments/table4_host.py --sessions 32,48,64,80 \\
        --variant bw16:flashstate:bw=16 --variant instep:vllm:host_load=in-step

`--variant NAME:POLICY:ITEMS` adds a column run with one thing changed: ITEMS is a comma
list of engine rules (`replay.sim.engine.rules`, e.g. host_load=in-step), `admission=`
park|schedule, `bw=` host bandwidth in GB/s per GPU, `host=` GiB, `ext=` GiB of an external
store behind it and `store=` mooncake|lmcache (docs/cache-tiers.md), `host_states=leaves`
(a what-if, not an engine's rule: host memory takes only the states with no deeper state
below them, GreedyDual-Size's leaves, so FlashState's superseded chunk-end states are not
written there), or a policy option or
rule switch (`replay.sim.cache.policy_base.RULES`, e.g. leaf_idle_s=0). Prints one Markdown
row per load; `--json FILE` writes every run's figures. `--host-mix` also prints, per run,
what the host pool held over the last two thirds of its samples (host-only KV blocks,
host-only states, the GPU's resident blocks) and how many entries the host evicted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from replay.profiles import load_profile
from replay.sim.cache.policies import POLICY_NAMES, PolicyError, make_policy
from replay.sim.cache.tiers import HostTier
from replay.sim.engine.rules import VLLM_RULES, parse_rules
from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace, sample_path
from replay.traces.scale import resolve_token_scale
from replay.workload import TIMED_WARMUP_S

MODEL = "glm-5.3-flash"
HOST_GB = 512.0
SYSTEMS = ("flashstate", "vllm", "sglang")
# The source's figures at 80 sessions (seed document, Table 4's line): output tokens per
# minute and p90 TTFT in seconds, per system.
SOURCE_80 = {"flashstate": (172.8e3, 7.18), "vllm": (122.2e3, 21.88), "sglang": (126.9e3, 22.97)}


def parse_variant(text: str) -> tuple[str, str, dict[str, Any]]:
    """`NAME:POLICY:ITEMS` -> (name, policy, SimConfig changes)."""
    parts = text.split(":", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise ValueError(f"--variant '{text}': expected NAME:POLICY:ITEMS")
    name, policy, items = parts[0], parts[1], parts[2] if len(parts) == 3 else ""
    if policy not in POLICY_NAMES:
        raise ValueError(f"--variant '{text}': unknown policy '{policy}'")
    rules: list[str] = []
    change: dict[str, Any] = {"policy_opts": {}}
    for item in filter(None, (x.strip() for x in items.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--variant '{text}': '{item}' is not KEY=VALUE")
        if key in ("allocation", "gate", "preemption", "subblock_chunks", "host_load"):
            rules.append(item)
        elif key == "admission":
            change["admission"] = value
        elif key == "store":
            change["external_store"] = value
        elif key == "host_states":
            if value not in ("all", "leaves"):
                raise ValueError(f"--variant '{text}': host_states must be all or leaves")
            change["host_states"] = value
        elif key in ("bw", "host", "ext"):
            try:
                gb = float(value)
            except ValueError:
                gb = -1.0
            if gb <= 0:
                raise ValueError(f"--variant '{text}': {key} must be a positive number of GB")
            field = {"bw": "host_bandwidth_gbs", "host": "host_memory_gb"}
            change[field.get(key, "external_memory_gb")] = gb
        else:
            change["policy_opts"][key] = (
                json.loads(value) if value[:1] in "0123456789tf-" else value
            )
    change["engine_rules"] = ",".join(rules)
    try:  # a bad rule or policy option is reported before any run
        parse_rules(change["engine_rules"], VLLM_RULES)
        make_policy(policy, load_profile(MODEL), **change["policy_opts"])
    except (ValueError, PolicyError) as e:
        raise ValueError(f"--variant '{text}': {e}") from None
    return name, policy, change


def parse_loads(text: str) -> list[int]:
    """`A-B` (every load from A to B) or a comma list -> session counts."""
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-"))
            loads = list(range(lo, hi + 1))
        else:
            loads = [int(x) for x in text.split(",")]
    except ValueError:
        loads = []
    if not loads or min(loads) < 1:
        raise ValueError(f"--sessions '{text}': expected A-B or a comma list of session counts")
    return loads


class HostMix:
    """Samples a host tier's contents each 50th time it makes room (`HostTier._fit`)."""

    def __init__(self) -> None:
        self.samples: list[tuple[int, int, int, int]] = []
        fit = HostTier._fit

        def sampled(tier: HostTier) -> None:
            fit(tier)
            tier.__dict__["_fits"] = tier.__dict__.get("_fits", 0) + 1
            if tier.__dict__["_fits"] % 50 == 0:
                c = tier.cache
                self.samples.append(
                    (len(tier.blocks), len(tier.states), c.resident_blocks, tier.evictions)
                )

        HostTier._fit = sampled  # type: ignore[method-assign,assignment]

    def take(self) -> str:
        late = self.samples[len(self.samples) // 3 :]
        self.samples = []
        if not late:
            return "host never full"
        mean = [sum(x[i] for x in late) / len(late) for i in range(3)]
        return (
            f"host-only blocks {mean[0]:,.0f}, host-only states {mean[1]:,.0f}, "
            f"GPU blocks {mean[2]:,.0f}; host evictions {late[-1][3]:,}"
        )


MIX: HostMix | None = None
_write_state = HostTier.evicted_state


def host_states(which: str) -> None:
    """`host_states=leaves`: host memory takes only leaf states (`State.inner` false)."""

    def leaves_only(tier: HostTier, s: Any) -> None:
        if not s.inner:
            _write_state(tier, s)

    HostTier.evicted_state = _write_state if which == "all" else leaves_only  # type: ignore[method-assign,assignment]


def run(
    trace: Any, scale: float, policy: str, n: int, seed: int, label: str = "", **change: Any
) -> dict[str, Any]:
    host_states(change.pop("host_states", "all"))
    cfg = SimConfig(
        policy=policy,
        sessions=n,
        seed=seed,
        model=MODEL,
        timing="engine",
        token_scale=scale,
        warmup_s=TIMED_WARMUP_S,
        host_memory_gb=change.pop("host_memory_gb", HOST_GB),
        **change,
    )
    try:
        res = simulate(trace, cfg, load_profile(MODEL))
    finally:
        host_states("all")  # the engines' own rule again
    s = res.summary
    if MIX is not None:
        print(f"  {label or policy} at {n}: {MIX.take()}")
    return {
        "policy": policy,
        "sessions": n,
        "seed": seed,
        "out_min": s["output_tokens_per_min"],
        "out_min_gpu": s["output_tokens_per_min_per_gpu"],
        "ttft_p50": s.get("ttft_p50_s"),
        "ttft_p90": s.get("ttft_p90_s"),
        "hit": s["hit_rate"],
        "host_hit": s.get("host_hit_rate", 0.0),
        "external_hit": s.get("external_hit_rate", 0.0),
        "requests": s["requests"],
        "waiting_mean": (res.engine or {}).get("waiting_mean"),
        "wall_s": res.wall_seconds,
    }


def fmt_row(n: int, cells: dict[str, dict[str, Any]], names: list[str]) -> str:
    def k(x: float) -> str:
        return f"{x / 1e3:.1f}K"

    f, v = cells["flashstate"], cells["vllm"]
    gain = f["out_min"] / v["out_min"] - 1 if v["out_min"] else float("nan")
    outs = " / ".join(k(cells[p]["out_min"]) for p in names)
    p90 = " / ".join(f"{cells[p]['ttft_p90']:.2f}" for p in names)

    def hit(c: dict[str, Any]) -> str:
        ext = f" + {c['external_hit']:.0%} store" if c["external_hit"] else ""
        return f"{c['hit']:.0%} ({c['host_hit']:.0%}{ext})"

    hits = " / ".join(hit(cells[p]) for p in names)
    return f"| {n} | {outs} | {gain:+.1%} | {p90} | {hits} |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", help="trace (default: the bundled sample)")
    ap.add_argument("--sessions", default="32-80", help="A-B (every load) or a comma list")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variant", action="append", default=[], help="NAME:POLICY:ITEMS")
    ap.add_argument("--json", type=Path, help="write every run's figures here")
    ap.add_argument("--host-mix", action="store_true", help="print what each host pool held")
    a = ap.parse_args(argv)
    global MIX
    MIX = HostMix() if a.host_mix else None
    try:
        loads = parse_loads(a.sessions)
        variants = [parse_variant(v) for v in a.variant]
    except ValueError as e:
        print(f"table4_host: {e}", file=sys.stderr)
        return 2
    trace = load_trace(a.trace or str(sample_path()))
    scale = resolve_token_scale(trace, None)
    names = [*SYSTEMS, *(name for name, _, _ in variants)]
    print(f"GLM-5.3-Flash, {HOST_GB:g} GiB host, engine timing, seed {a.seed}")
    print(f"columns: {' / '.join(names)}; gain: flashstate over vllm; hit (of it host)")
    print("| sessions | output tok/min (engine) | gain | TTFT p90 s | hit rate (host) |")
    print("|---|---|---|---|---|")
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for n in loads:
        cells = {p: run(trace, scale, p, n, a.seed) for p in SYSTEMS}
        for name, policy, change in variants:
            cells[name] = run(
                trace, scale, policy, n, a.seed, name, **json.loads(json.dumps(change))
            )
            cells[name]["variant"] = name
        rows += cells.values()
        print(fmt_row(n, cells, names), flush=True)
    if 80 in loads:
        src = " / ".join(f"{SOURCE_80[p][0] / 1e3:.1f}K" for p in SYSTEMS)
        p90 = " / ".join(f"{SOURCE_80[p][1]:.2f}" for p in SYSTEMS)
        print(f"| source, 80 | {src} | {172.8 / 122.2 - 1:+.1%} | {p90} | |")
    print(f"{time.perf_counter() - t0:.0f} s")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
