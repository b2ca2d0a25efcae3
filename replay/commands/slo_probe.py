"""`replay slo-search`'s probes through `replay run` (issue 35, point 3): emulated engines
(`--engines`: the emulators each run starts, at its time scale) or live ones (`--endpoint
NAME=URL`).

Each probe is one `replay run` of one engine: the same resolution (`run._resolved`: the
embedded default's layers without endpoints, the workload config's with them, and every
refusal `replay run` makes), the same trace checks (`run._load`), plan and executor
(`run._plan`, `run._execute`: its lock, its emulators, preflight, `run_live`), written as a
run directory under `OUT/probes/` (`ENGINE-sN-seedS`). A probe is judged as a simulated one
is (`analysis.slo_search`): its summary.json's `slo_request_share` (the run's SLO is the
search's `--slo`) against `--slo-share`; a degraded run (too many failed requests, an engine
down at the end) fails the SLO whatever its share. The answer is then run again on each
`--confirm-seeds` seed as `OUT/ENGINE-sN-seedS`, and their summaries are the band.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replay.commands.common import err_console, fail

if TYPE_CHECKING:
    from analysis.slo_search import EngineAnswer, Probe
    from replay.runspec.live import RunFlags

EXECUTORS = ("sim", "emulated", "live")
PROBES = "probes"  # the probes' run directories, under the search's --out


@dataclasses.dataclass
class RunProbes:
    """How one search's probes run: per engine, `replay run`'s flags for it (sessions, seed
    and --out are set per probe), its GPUs and the executor ("emulated" or "live")."""

    executor: str
    flags: dict[str, RunFlags]
    gpus: dict[str, int] = dataclasses.field(default_factory=dict)
    kinds: dict[str, str] = dataclasses.field(default_factory=dict)
    seed: int = 0
    duration_s: float = 0.0
    window: tuple[float, float] = (0.0, 0.0)
    trace: str = ""


def _engine_flags(engines: str | None, endpoint: list[str], base: RunFlags) -> dict[str, RunFlags]:
    """One `RunFlags` per engine: `--engines a,b` → `--engines a` and `--engines b`;
    `--endpoint a=URL` → that endpoint alone (replay run's parser checks them first)."""
    from replay.client.config import ConfigError, engines_from_flags

    try:
        specs = engines_from_flags(engines, endpoint, own_command=False)
    except ConfigError as e:
        fail(str(e))
    raw = {ep.partition("=")[0].strip(): ep for ep in endpoint}
    return {
        s.name: dataclasses.replace(
            base,
            engines=s.name if not endpoint else None,
            endpoint=[raw[s.name]] if s.name in raw else [],
            workload=dict(base.workload),
        )
        for s in specs
    }


def plan_probes(
    engines: str | None, endpoint: list[str], base: RunFlags, start: int, limit: int
) -> RunProbes:
    """Every engine's probe flags, resolved once as `replay run` resolves them (its refusals
    name their flags), and the trace checked against `--max-sessions`: what the machine
    holds (`scale_guard.check_live_memory`) is refused before the first probe."""
    from replay.commands import run
    from replay.commands.scale_guard import ScaleError, check_live_memory, check_prompts
    from replay.runspec import live
    from replay.runspec.resolve import SpecError
    from replay.traces import TraceError, load_trace, sample_path

    per = _engine_flags(engines, endpoint, base)
    probes = RunProbes("live" if endpoint else "emulated", per)
    for name, flags in per.items():
        first = _at(flags, start, flags.workload.get("seed"), None)
        res = run._resolved(first, {}, {})
        trace = res.spec.workload.trace
        try:
            loaded = load_trace(trace or sample_path())
            check_prompts(loaded)
            check_live_memory(loaded, limit, 1)
            spec = live.finish(res, loaded, live.is_sample(trace), res.spec.workload.token_scale)
        except (TraceError, FileNotFoundError) as e:
            fail(f"--trace: {e}")
        except ScaleError as e:
            fail(str(e).replace("--sessions", "--max-sessions"))
        except SpecError as e:
            fail(str(e))
        probes.gpus[name] = spec.engines[0].engine.gpus
        probes.kinds[name] = spec.engines[0].engine.kind
        probes.seed = spec.workload.seed
        cfg = spec.workload.config(clamp_warmup=True)
        probes.duration_s, probes.window = cfg.duration_s, cfg.window
        probes.trace = trace or str(sample_path())
    return probes


def _at(flags: RunFlags, sessions: int, seed: int | None, out: Path | None) -> RunFlags:
    workload = {**flags.workload, "sessions": sessions, "seed": seed}
    return dataclasses.replace(flags, workload=workload, out=out)


def _drop_empty(run_dir: Path) -> None:
    """A probe that never ran leaves no folder: its own, then `probes/`, if they are empty."""
    for d in (run_dir, run_dir.parent) if run_dir.parent.name == PROBES else (run_dir,):
        try:
            d.rmdir()  # only an empty folder goes
        except FileNotFoundError:
            continue
        except OSError:
            return


def run_probe(flags: RunFlags, engine: str, sessions: int, seed: int, run_dir: Path,
              threshold: float) -> tuple[Probe, dict[str, Any]]:  # fmt: skip
    """One `replay run` of `engine` at `sessions` on `seed` into `run_dir`: its probe (the
    summary's SLO share against `threshold`) and the engine's summary."""
    import json

    from analysis.slo_search import Probe
    from replay.commands import run

    at = _at(flags, sessions, seed, run_dir)
    res = run._resolved(at, {}, {})
    spec, loaded, out = run._load(res, at)
    plan = run._plan(spec, loaded, out, False)
    outcome = run._execute(plan, spec, False, res.user_time_scale)
    if outcome is None:
        _drop_empty(run_dir)
        fail(f"preflight failed for {engine}: fix it, then run the search again")
    if outcome.ended_by is not None or outcome.status not in ("completed", "degraded"):
        why = outcome.ended_by or outcome.status
        fail(f"the probe of {engine} at {sessions} sessions ended: {why} ({run_dir})", code=1)
    summary = outcome.summary or json.loads((out / "summary.json").read_text())
    got = (summary.get("engines") or {}).get(engine) or {}
    share = got.get("slo_request_share")
    share = float("nan") if share is None else float(share)
    n = int(got.get("requests") or 0)
    met = bool(n and share >= threshold and outcome.status == "completed")
    return Probe(sessions, seed, n, share, met), got


def say_probe(name: str, p: Probe) -> None:
    """One step of a search as it is printed: `name`'s load, its share within the SLO, the
    verdict (the simulator's search and the runs' alike)."""
    if p.requests:
        said = f"{p.share:.1%} of {p.requests} requests within the SLO"
    else:  # nothing measured: no share to give, and nothing met the SLO
        said = "no request measured"
    err_console.print(
        f"  {name}: {p.sessions} sessions → {said}: {'holds' if p.met else 'fails'}",
        highlight=False,
    )


def search_engine(probes: RunProbes, engine: str, seed: int, threshold: float, start: int,
                  limit: int, out: Path) -> EngineAnswer:  # fmt: skip
    """The search (`analysis.slo_search.search_largest`) over `replay run`s of one engine."""
    from analysis.slo_search import EngineAnswer, search_largest

    flags = probes.flags[engine]
    done: list[Probe] = []

    def meets(n: int) -> bool:
        run_dir = out / PROBES / f"{engine}-s{n}-seed{seed}"
        p, _ = run_probe(flags, engine, n, seed, run_dir, threshold)
        done.append(p)
        say_probe(f"{engine} ({probes.executor})", p)
        return p.met

    found = search_largest(meets, start, limit)
    gpus, kind = probes.gpus[engine], probes.kinds[engine]
    return EngineAnswer(engine, kind, gpus, found.answer, found.capped, done)


def confirm_engine(probes: RunProbes, answer: EngineAnswer, seeds: list[int],
                   threshold: float, out: Path) -> None:  # fmt: skip
    """The answer run again on every seed (`OUT/ENGINE-sN-seedS`): its confirmation probes
    and their band (`replay.band`), in `answer`."""
    from replay.band import Band, EngineBand, SeedPoint

    def num(d: dict[str, Any], key: str) -> float:
        v = d.get(key)
        return float("nan") if v is None else float(v)

    points = []
    for s in seeds:
        run_dir = out / f"{answer.engine}-s{answer.sessions}-seed{s}"
        p, got = run_probe(probes.flags[answer.engine], answer.engine, answer.sessions, s,
                           run_dir, threshold)  # fmt: skip
        answer.confirm.append(p)
        points.append(SeedPoint(s, num(got, "hit_rate"), num(got, "ideal_hit_rate"),
                                num(got, "ttft_p50"), num(got, "output_tokens_per_min")))  # fmt: skip
    band = Band(answer.sessions, seeds, "engine", probes.executor,
                [EngineBand(answer.engine, answer.policy, points)])  # fmt: skip
    answer.band = band.to_json()


__all__ = ["EXECUTORS", "PROBES", "RunProbes", "confirm_engine", "plan_probes", "search_engine"]
