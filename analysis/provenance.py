"""What a result is: the provenance every output of a run carries (issue 32).

A reader of a table, a report, a figure or a dashboard card must see, beside the numbers, who
produced them (a live engine, an emulator, the simulator and its clock), on which corpus and
at which token scale, with which model profile, at what load against the demo's, over which
seeds and window, and with which version of this project. `provenance(manifest, band)` reads
them from the run's manifest (and its seed band, `replay.band`, where it has one); every output
renders the same `Provenance`: `line()` for a title or caption, `items()` for a header table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from analysis.manifest import Window
from analysis.registry import executor_of
from replay.rundir_models import Manifest

if TYPE_CHECKING:
    from analysis.runs import Run
    from replay.band import Band

# Short words for a legend or a group heading; EXECUTOR_WORDS for a title or a header.
EXECUTOR_SHORT = {
    "live": "live",
    "emulated": "emulated",
    "sim-engine": "simulated, engine timing",
    "sim-trace": "simulated, trace timing",
}
EXECUTOR_WORDS = {
    "live": "live (real engines)",
    "emulated": "emulated (the engine model behind HTTP, no GPU)",
    "sim-engine": "simulated (engine timing, no GPU)",
    "sim-trace": "simulated (trace timing: the trace's own latencies)",
}


@dataclass(frozen=True)
class Provenance:
    executor: str
    corpus: str
    profile: str
    load: str
    seeds: str
    window: str
    version: str

    def items(self) -> list[tuple[str, str]]:
        return [
            ("executor", self.executor),
            ("corpus", self.corpus),
            ("model profile", self.profile),
            ("load", self.load),
            ("seeds", self.seeds),
            ("window", self.window),
            ("version", self.version),
        ]

    def line(self) -> str:
        """One line: "emulated (…); corpus …; profile …; load …; seeds …; window …; v…"."""
        parts = (self.executor, self.corpus, f"profile {self.profile}", self.load)
        return "; ".join((*parts, self.seeds, self.window, self.version))


def _corpus(m: Manifest) -> str:
    trace = m.trace
    name = Path(trace.path).name if trace is not None and trace.path else "unknown corpus"
    scale = (trace.token_scale if trace is not None else None) or m.config.token_scale or 1.0
    if scale == 1.0:
        return f"corpus {name} (full-size tokens)"
    return f"corpus {name} (token lengths ÷{scale:g}; every token figure shown at full size)"


def _profile(m: Manifest) -> str:
    names: list[str] = []
    for e in m.engines:
        found = next((f.split("=", 1)[1] for f in e.flags if f.startswith("model_profile=")), None)
        name = found or e.model or m.config.model
        if name and name not in names:
            names.append(name)
    if not names and m.config.model:
        names.append(m.config.model)
    return ", ".join(names) or "unknown"


def _window(m: Manifest, used: Window | None = None) -> str:
    """The manifest's window, or `used` (the window the figures beside it count: a
    `--window`, or the manifest's clipped to the data) with where it comes from."""
    d = m.config.duration_s
    of = f" of {d / 60:g}" if d else ""
    if used is not None:
        return f"window {used.start_s / 60:g}–{used.end_s / 60:g} min{of} ({used.source})"
    w = m.config.window
    if w is None:
        return "window: the whole run"
    return f"window {w[0] / 60:g}–{w[1] / 60:g} min{of}"


def measured_window(run: Run, used: Window) -> Window | None:
    """`used` where it is not the run's own window (`Run.default_window`: its manifest's, or
    the whole run), so a provenance line says the window its figures count; None where it is
    the run's own (the line then reads as it always has)."""
    own = run.default_window()
    return None if (used.start_s, used.end_s) == (own.start_s, own.end_s) else used


def load_words(sessions: int | None, band: Band | None) -> str:
    """ "37 sessions, 0.98× the demo's offered load" (the band measures it), else the count."""
    count = f"{sessions} sessions" if sessions is not None else "sessions unknown"
    load = band.load if band is not None else None
    if load is None:
        return f"{count} (load against the demo's not measured)"
    return f"{count}, {load:.2f}× the demo's offered load"


def provenance(m: Manifest, band: Band | None = None, window: Window | None = None) -> Provenance:
    """What the run of manifest `m` is; `window`: the window its figures count where that is
    not the manifest's own (`measured_window`)."""
    executor = executor_of(m)
    words = EXECUTOR_WORDS[executor]
    if executor == "emulated" and m.config.time_scale and m.config.time_scale != 1:
        words = words[:-1] + f", clock ×{m.config.time_scale:g})"
    seed = m.config.seed if m.config.seed is not None else m.seed
    seeds = f"seed {seed}" if seed is not None else "seed unknown"
    if band is not None and band.seeds:
        seeds += (
            f"; seed band {band.seeds[0]}–{band.seeds[-1]} ({len(band.seeds)} seeds, "
            f"simulated, {band.timing} timing)"
        )
    return Provenance(
        executor=words,
        corpus=_corpus(m),
        profile=_profile(m),
        load=load_words(m.config.sessions, band),
        seeds=seeds,
        window=_window(m, window),
        version=f"agent-replay {m.harness_version or 'unknown version'}",
    )


BAND_HEAD = ("Engine", "Hit rate (min–max, mean)", "TTFT p50 s (min–max, mean)", "Held the cliff")


def band_rows(band: Band) -> list[tuple[str, str, str, str]]:
    """The seed band as rows: per engine its hit rate and TTFT over the seeds and how many
    seeds held (`replay.band`)."""
    rows = []
    for e in band.engines:
        lo, mean, hi = (100 * x for x in e.span("hit_rate"))
        tlo, tmean, thi = e.span("ttft_p50_s")
        held = f"{e.held} of {len(e.points)}" + (" (on the cliff)" if e.on_cliff else "")
        rows.append(
            (
                e.engine,
                f"{lo:.0f}–{hi:.0f}% ({mean:.0f})",
                f"{tlo:.1f}–{thi:.1f} ({tmean:.1f})",
                held,
            )
        )
    return rows


def band_intro(band: Band) -> str:
    return (
        f"The same point simulated over {len(band.seeds)} seeds ({band.seeds[0]}–"
        f"{band.seeds[-1]}, {band.timing} timing, the emulators' engine model): "
        f"{band.verdict()}. A seed holds an engine when its hit rate is at least half its "
        "ideal hit rate; near a cliff one seed misleads, so read the run beside its band."
    )


def run_band(run_dir: str | Path) -> Band | None:
    """The run's seed band (`replay.band`), or None: the readers' one way to it."""
    from replay.band import read_band

    return read_band(Path(run_dir))


def run_provenance(run_dir: str | Path, window: Window | None = None) -> Provenance:
    """The provenance of the run in `run_dir` (its manifest and band.json); `window` as
    `provenance` takes it."""
    from replay.rundir import read_manifest

    path = Path(run_dir)
    return provenance(read_manifest(path), run_band(path), window)


__all__ = [
    "BAND_HEAD",
    "EXECUTOR_SHORT",
    "EXECUTOR_WORDS",
    "Provenance",
    "band_intro",
    "band_rows",
    "load_words",
    "measured_window",
    "provenance",
    "run_band",
    "run_provenance",
]
