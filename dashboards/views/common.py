"""Widgets the pages share: the run picker, the pricing picker, and error display.

A chosen run is remembered in session state under a plain key (not a widget key), so it
survives switching pages; `?run=NAME` in the address opens a run directly (validated like
any other path: it must lie inside the runs folder).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from analysis.runs import Run, RunDirError
from dashboards.combine import companions
from dashboards.loading import RunUnavailable, load, load_group
from dashboards.paths import PathRefused, open_inside, relative_name, scan_runs
from dashboards.recency import newest
from pricing.sheets import GpuRate, PriceSheet, PricingError, load_gpu_rates, load_sheets

CHOSEN_RUN = "chosen_run"


def no_runs_message(root: Path) -> None:
    st.info(
        f"No run directories under `{root}` yet. Write one with `replay run --out {root}/NAME` "
        "or `replay simulate --out ...`, or restart with `replay dashboard FOLDER`."
    )


def available_runs(root: Path) -> list[str]:
    """The runs under `root`; an unreadable folder is reported and gives none."""
    try:
        names, skipped = scan_runs(root)
    except (RunDirError, OSError) as e:
        st.error(f"Cannot list the runs folder: {e}")
        return []
    for note in skipped:
        st.caption(f"Skipped {note}")
    return names


def _deep_link(root: Path, names: list[str]) -> str | None:
    """The `?run=` query parameter, if it names a listed run inside the folder."""
    wanted = st.query_params.get("run")
    if not wanted:
        return None
    try:
        path = open_inside(root, wanted)
    except PathRefused as e:
        st.error(f"Ignoring `?run={wanted}`: {e}")
        return None
    name = relative_name(root, path)
    if name not in names:
        st.warning(f"`?run={wanted}` is not a run directory under {root}; pick one below.")
        return None
    return name


def pick_run(root: Path, key: str, label: str = "Run") -> str | None:
    """A selectbox of the runs under `root`, opening on the newest run (`dashboards.recency`)
    unless the address names one or one was chosen on another page (remembered)."""
    names = available_runs(root)
    if not names:
        no_runs_message(root)
        return None
    linked = _deep_link(root, names)
    if linked is not None:
        st.session_state[CHOSEN_RUN] = linked
    remembered = st.session_state.get(CHOSEN_RUN)
    first = remembered if remembered in names else newest(root, names)
    index = names.index(first) if first in names else len(names) - 1
    choice = st.selectbox(label, names, index=index, key=key)
    st.session_state[CHOSEN_RUN] = choice
    return str(choice) if choice is not None else None


def pick_run_group(root: Path, key: str) -> Run | None:
    """`pick_run`, then the same workload's runs by other engines beside it (the one-run-
    per-policy folders `replay simulate` writes), loaded as one run; None after showing why
    when something cannot be opened."""
    name = pick_run(root, key=key)
    if name is None:
        return None
    others = companions(root, name, available_runs(root))
    chosen: list[str] = []
    if others:
        chosen = st.multiselect(
            "Side by side with (the same trace, sessions, seed and window)",
            others,
            default=others,
            key=f"{key}_with",
        )
    return load_or_explain(root, name, [str(c) for c in chosen])


def load_or_explain(root: Path, name: str, with_: list[str] | None = None) -> Run | None:
    """The run (with `with_` stacked beside it), or None after showing why it cannot be
    opened (never a traceback)."""
    try:
        run = load_group(root, [name, *with_]) if with_ else load(root, name)
    except RunUnavailable as e:
        st.error(str(e))
        return None
    for note in run.notes:
        st.caption(f"Note: {note}")
    provenance_card(run)
    return run


def provenance_card(run: Run) -> None:
    """What the run is (`analysis.provenance`: executor, corpus and scale, profile, load
    against the demo's, seeds, window, version) and, where it has one, its seed band: the
    same point over several seeds, and which engines it puts on the cliff."""
    import pandas as pd

    from analysis.provenance import BAND_HEAD, band_rows, provenance, run_band

    band = run_band(run.path)
    st.info("**What this is:** " + provenance(run.manifest, band).line(), icon="ℹ️")
    if band is None:
        return
    with st.expander(f"Seed band ({len(band.seeds)} seeds): {band.verdict()}"):
        st.dataframe(
            pd.DataFrame(band_rows(band), columns=list(BAND_HEAD)),
            hide_index=True,
            width="stretch",
            key=f"band_{run.run_id}",
        )
        st.caption(
            "The same point simulated over several seeds (engine timing, the emulators' "
            "engine model). A seed holds an engine when its hit rate is at least half its "
            "ideal hit rate; an engine is on the cliff when some seeds hold and some fall, "
            "so one run of it does not characterise the point."
        )


# The GPU choice that prices each engine at its own GPU's rate (the run's manifest), as
# `replay price RUN_DIR` and the report do without --gpu.
OWN_GPUS = "(each engine's own GPU)"


@dataclass(frozen=True)
class PricingChoice:
    sheet: PriceSheet
    gpu: GpuRate | None  # None: each engine at its own GPU's rate


def pick_pricing(
    key: str, gpu_hint: str | None = None, own_gpus: bool = False
) -> PricingChoice | None:
    """Price sheet and GPU rate selectors over `configs/pricing/` (defaults: the files'
    defaults, or the GPU the run's manifest names). With `own_gpus` the GPU list starts
    with `OWN_GPUS`, the default: each engine at its own GPU's rate."""
    try:
        sheets = load_sheets()
        gpus = load_gpu_rates()
    except PricingError as e:
        st.error(f"Cannot read the price data: {e}")
        return None
    sheet_names = sheets.names
    gpu_names = [OWN_GPUS, *gpus.names] if own_gpus else gpus.names
    gpu_default = OWN_GPUS if own_gpus else gpus.default
    if gpu_hint and not own_gpus:
        for name, entry in gpus.entries.items():
            if gpu_hint.casefold() in (name.casefold(), entry.gpu.casefold()):
                gpu_default = name

    def gpu_label(n: str) -> str:
        if n == OWN_GPUS:
            return "each engine's own GPU (the run's manifest)"
        return f"{gpus.entries[n].gpu} ${gpus.entries[n].rate_per_gpu_hour}/h"

    left, right = st.columns(2)
    sheet_name = left.selectbox(
        "Price sheet",
        sheet_names,
        index=sheet_names.index(sheets.default),
        key=f"{key}_sheet",
        format_func=lambda n: f"{n} — {sheets.entries[n].label}" if sheets.entries[n].label else n,
    )
    gpu_name = right.selectbox(
        "GPU rental rate",
        gpu_names,
        index=gpu_names.index(gpu_default),
        key=f"{key}_gpu",
        format_func=gpu_label,
    )
    gpu = None if gpu_name == OWN_GPUS else gpus.entries[str(gpu_name)]
    return PricingChoice(sheets.entries[str(sheet_name)], gpu)


def fmt(value: float, unit: str) -> str:
    """A panel number for display: percentages, seconds, dollars, token counts."""
    if value != value:  # NaN
        return "—"
    if unit == "%":
        return f"{value * 100:.1f}%"
    if unit == "s":
        # Simulated and emulated engines answer in milliseconds; "0.00 s" would hide it.
        if abs(value) < 1:
            return f"{value * 1000:.1f} ms" if abs(value) < 0.01 else f"{value * 1000:.0f} ms"
        return f"{value:.2f} s"
    if unit == "$":
        # Cents matter on per-GPU-hour figures; user costs per 1M are often under a dime.
        places = 2 if abs(value) >= 1 else 4
        return f"-${-value:,.{places}f}" if value < 0 else f"${value:,.{places}f}"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.2f}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.1f}K"
    return f"{value:,.0f}"
