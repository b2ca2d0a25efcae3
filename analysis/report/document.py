"""The report documents: `report.md`, a self-contained `report.html` (plotly.js inlined, works
offline) and a `report.tex` fragment, each citing every run's manifest: the trace and its
checksum, seed, sessions, window, engines with server versions and flags, harness version."""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.offline

from analysis.manifest import manifest_engines, manifest_seed, manifest_sessions, manifest_trace
from analysis.provenance import (
    BAND_HEAD,
    Provenance,
    band_intro,
    band_rows,
    measured_window,
    provenance,
    run_band,
)
from analysis.report.content import ReportData, RunAnalysis
from analysis.report.tables import Table, tex_escape
from replay.band import Band
from replay.rundir import run_status

NOT_RECORDED = "not recorded"


def citation(a: RunAnalysis) -> dict[str, Any]:
    """What the manifest says about a run, with `not recorded` where it is silent."""
    m = a.run.manifest
    trace, sha = manifest_trace(m)
    engines = []
    for name in a.run.engines:
        info = manifest_engines(m).get(name)
        engines.append(
            {
                "name": name,
                "kind": (info.kind if info else None) or NOT_RECORDED,
                "model": (info.model if info else None) or NOT_RECORDED,
                "gpus": f"{info.gpus if info else 1}× {(info.gpu_type if info else None) or 'GPU'}"
                + (" (assumed)" if info is None or info.gpus_assumed else ""),
                "server_version": (info.server_version if info else None) or NOT_RECORDED,
                "flags": " ".join(info.flags) if info and info.flags else NOT_RECORDED,
            }
        )
    seed, sessions = manifest_seed(m), manifest_sessions(m)
    prov = run_provenance(a)
    return {
        "executor": prov.executor,
        "corpus": prov.corpus,
        "profile": prov.profile,
        "load": prov.load,
        "seeds": prov.seeds,
        "run_id": a.run.run_id,
        "path": str(a.run.path),
        "status": run_status(a.run.path, m) if m.status else NOT_RECORDED,
        "trace": trace or NOT_RECORDED,
        "trace_sha256": sha or NOT_RECORDED,
        "seed": NOT_RECORDED if seed is None else seed,
        "sessions": NOT_RECORDED if sessions is None else sessions,
        "window": f"{a.window.start_s:g}–{a.window.end_s:g} s ({a.window.source})",
        "harness_version": m.harness_version or NOT_RECORDED,
        "command": m.command or NOT_RECORDED,
        "started": m.start or NOT_RECORDED,
        "ended": m.end or NOT_RECORDED,
        "engines": engines,
    }


_FIELDS = (
    ("executor", "Executor"),
    ("corpus", "Corpus"),
    ("profile", "Model profile"),
    ("load", "Load"),
    ("seeds", "Seeds"),
    ("status", "Status"),
    ("trace", "Trace"),
    ("trace_sha256", "Trace sha256"),
    ("seed", "Seed"),
    ("sessions", "Sessions"),
    ("window", "Measured window"),
    ("harness_version", "Harness version"),
    ("command", "Command"),
    ("started", "Started"),
    ("ended", "Ended"),
)
_ENGINE_FIELDS = (
    ("name", "Engine"),
    ("kind", "Kind"),
    ("model", "Model"),
    ("gpus", "GPUs"),
    ("server_version", "Server version"),
    ("flags", "Flags"),
)


def run_provenance(a: RunAnalysis) -> Provenance:
    """What the run is (`analysis.provenance`), its seed band included where it has one, and
    the window the report measured where that is not the run's own (a `--window`)."""
    return provenance(a.run.manifest, run_band(a.run.path), measured_window(a.run, a.window))


def caption(data: ReportData) -> str:
    """What every figure shows, in words: the one run's provenance, or the runs' shared
    fields (a sweep's runs differ in what its table of runs lists)."""
    if len(data.runs) == 1:
        return run_provenance(data.runs[0]).line()
    shared, varying = shared_fields(data)
    keep = {"Executor", "Corpus", "Model profile", "Load", "Seeds", "Measured window"}
    parts = [f"{label.lower()}: {value}" for label, value in shared if label in keep]
    if varying:
        parts.append(f"per run: {', '.join(varying).lower()}")
    return f"{len(data.runs)} runs; " + "; ".join(parts)


def band_of(a: RunAnalysis) -> Band | None:
    return run_band(a.run.path)


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def shared_fields(data: ReportData) -> tuple[list[tuple[str, str]], list[str]]:
    """For a sweep: the citation fields every run shares ((label, value)), and the others."""
    cites = [citation(a) for a in data.runs]
    shared, varying = [], []
    for key, label in _FIELDS:
        values = {str(c[key]) for c in cites}
        if len(values) == 1:
            shared.append((label, values.pop()))
        else:
            varying.append(label)
    return shared, varying


def _engines_once(data: ReportData) -> list[dict[str, Any]]:
    seen: dict[tuple[str, ...], dict[str, Any]] = {}
    for a in data.runs:
        for e in citation(a)["engines"]:
            seen.setdefault(tuple(str(e[k]) for k, _ in _ENGINE_FIELDS), e)
    return list(seen.values())


def render_markdown(data: ReportData, tables: list[Table], figures: dict[str, str]) -> str:
    """`figures` maps a figure name to the relative path shown (a PNG, or its JSON). A
    sweep's runs are cited once: shared fields listed, the runs in one table."""
    lines = ["# Replay report", "", f"Generated {_stamp()} by `replay report`.", ""]
    if data.warnings:
        lines += ["## Warnings", "", *[f"- **{w}**" for w in data.warnings], ""]
    if len(data.runs) > 1:
        shared, varying = shared_fields(data)
        lines += [f"## Provenance ({len(data.runs)} runs)", ""]
        lines += [f"- **{label}:** `{value}`" for label, value in shared]
        if varying:
            lines.append(f"- Per run ({', '.join(varying)}): see the table of runs below.")
        lines += ["", "| " + " | ".join(lbl for _, lbl in _ENGINE_FIELDS) + " |"]
        lines.append("|" + " --- |" * len(_ENGINE_FIELDS))
        for e in _engines_once(data):
            lines.append("| " + " | ".join(f"`{e[k]}`" for k, _ in _ENGINE_FIELDS) + " |")
        lines.append("")
    for a in data.runs if len(data.runs) == 1 else []:
        c = citation(a)
        lines += [f"## Run `{c['run_id']}`", ""]
        lines += [f"- **{label}:** `{c[key]}`" for key, label in _FIELDS]
        lines += ["", "| " + " | ".join(lbl for _, lbl in _ENGINE_FIELDS) + " |"]
        lines.append("|" + " --- |" * len(_ENGINE_FIELDS))
        for e in c["engines"]:
            lines.append("| " + " | ".join(f"`{e[k]}`" for k, _ in _ENGINE_FIELDS) + " |")
        lines.append("")
        band = band_of(a)
        if band is not None:
            lines += ["### Seed band", "", band_intro(band), ""]
            lines += ["| " + " | ".join(BAND_HEAD) + " |", "|" + " --- |" * len(BAND_HEAD)]
            lines += ["| " + " | ".join(r) + " |" for r in band_rows(band)]
            lines.append("")
    if data.notes:
        lines += ["## Notes", "", *[f"- {n}" for n in data.notes], ""]
    lines += ["## Tables", ""]
    for t in tables:
        if "md" in t.targets:
            lines += [t.to_markdown(), ""]
    lines += ["## Figures", "", f"Every figure: {caption(data)}.", ""]
    for name, rel in figures.items():
        if rel.endswith((".png", ".svg")):
            lines += [f"![{name}: {caption(data)}]({rel})", "", f"*{name.replace('_', ' ')}*", ""]
        else:
            lines += [f"- {name}: [{rel}]({rel}) (plotly JSON; static export was skipped)"]
    return "\n".join(lines) + "\n"


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;
color:#222;padding:0 1rem}table{border-collapse:collapse;margin:.5rem 0 1.5rem;font-size:.9rem}
th,td{padding:.25rem .6rem;border-bottom:1px solid #ddd}thead th{border-bottom:2px solid #444}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}.note{color:#666;font-size:.85rem}
code{background:#f4f4f4;padding:0 .2rem}.warnings{color:#a00}dl{display:grid;grid-template-columns:max-content auto;gap:.2rem 1rem}
dt{font-weight:600}.figure{margin:1rem 0}
"""


def render_html(
    data: ReportData, tables: list[Table], figures: dict[str, go.Figure], messages: list[str]
) -> str:
    """One self-contained page: inline CSS, plotly.js inlined once, every figure and table."""
    e = html.escape
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>Replay report</title>",
        f"<style>{_CSS}</style>",
        f"<script type='text/javascript'>{plotly.offline.get_plotlyjs()}</script>",
        "</head><body><h1>Replay report</h1>",
        f"<p>Generated {e(_stamp())} by <code>replay report</code>.</p>",
    ]
    if data.warnings:
        parts.append(
            "<h2>Warnings</h2><ul class='warnings'>"
            + "".join(f"<li><strong>{e(w)}</strong></li>" for w in data.warnings)
            + "</ul>"
        )
    if len(data.runs) > 1:
        shared, varying = shared_fields(data)
        parts.append(f"<section class='run'><h2>Provenance ({len(data.runs)} runs)</h2><dl>")
        parts += [f"<dt>{e(label)}</dt><dd><code>{e(value)}</code></dd>" for label, value in shared]
        if varying:
            parts.append(f"<dt>Per run</dt><dd>{e(', '.join(varying))}: the table of runs</dd>")
        parts.append("</dl><table><thead><tr>")
        parts += [f"<th>{e(label)}</th>" for _, label in _ENGINE_FIELDS]
        parts.append("</tr></thead><tbody>")
        for eng in _engines_once(data):
            parts.append(
                "<tr>"
                + "".join(f"<td><code>{e(str(eng[k]))}</code></td>" for k, _ in _ENGINE_FIELDS)
                + "</tr>"
            )
        parts.append("</tbody></table></section>")
    for a in data.runs if len(data.runs) == 1 else []:
        c = citation(a)
        parts.append(f"<section class='run'><h2>Run <code>{e(str(c['run_id']))}</code></h2><dl>")
        parts += [
            f"<dt>{e(label)}</dt><dd><code>{e(str(c[key]))}</code></dd>" for key, label in _FIELDS
        ]
        parts.append("</dl><table><thead><tr>")
        parts += [f"<th>{e(label)}</th>" for _, label in _ENGINE_FIELDS]
        parts.append("</tr></thead><tbody>")
        for eng in c["engines"]:
            parts.append(
                "<tr>"
                + "".join(f"<td><code>{e(str(eng[k]))}</code></td>" for k, _ in _ENGINE_FIELDS)
                + "</tr>"
            )
        parts.append("</tbody></table>")
        band = band_of(a)
        if band is not None:
            parts.append(f"<h3>Seed band</h3><p>{e(band_intro(band))}</p><table><thead><tr>")
            parts += [f"<th>{e(h)}</th>" for h in BAND_HEAD]
            parts.append("</tr></thead><tbody>")
            for row in band_rows(band):
                parts.append("<tr>" + "".join(f"<td>{e(v)}</td>" for v in row) + "</tr>")
            parts.append("</tbody></table>")
        parts.append("</section>")
    notes = data.notes + messages
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    parts.append("<h2>Figures</h2>")
    cap = e(caption(data))
    for name, fig in figures.items():
        div = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"fig-{name}")
        parts.append(
            f"<figure class='figure'>{div}<figcaption class='note'>"
            f"{e(name.replace('_', ' '))}: {cap}</figcaption></figure>"
        )
    parts.append("<h2>Tables</h2>")
    parts += [t.to_html() for t in tables if "html" in t.targets]
    parts.append("</body></html>")
    return "\n".join(parts)


def render_tex(data: ReportData, tables: list[Table], pdfs: dict[str, str]) -> str:
    """A LaTeX fragment to `\\input`: the warnings and what each run is, as text a compiled
    document shows (not comments), then every table and figure, each figure captioned with
    the runs' provenance."""
    t = tex_escape
    lines = ["% Generated by `replay report`; needs booktabs and graphicx.", ""]
    if data.warnings:
        lines += ["\\paragraph{Warnings.}", "\\begin{itemize}"]
        lines += [f"  \\item \\textbf{{{t(w)}}}" for w in data.warnings]
        lines += ["\\end{itemize}", ""]
    for a in data.runs:
        c = citation(a)
        lines += [f"\\paragraph{{Run {t(str(c['run_id']))}.}}", "\\begin{itemize}"]
        for key, label in _FIELDS:
            if key != "command":
                lines.append(f"  \\item {t(label)}: {t(str(c[key]))}")
        for eng in c["engines"]:
            lines.append(
                f"  \\item Engine {t(str(eng['name']))}: {t(str(eng['server_version']))}, "
                f"{t(str(eng['gpus']))}"
            )
        lines += ["\\end{itemize}", ""]
        band = band_of(a)
        if band is not None:
            lines += [f"\\paragraph{{Seed band.}} {t(band_intro(band))}", ""]
            lines += ["\\begin{tabular}{llll}", "\\toprule"]
            lines.append(" & ".join(t(h) for h in BAND_HEAD) + " \\\\")
            lines.append("\\midrule")
            lines += [" & ".join(t(v) for v in row) + " \\\\" for row in band_rows(band)]
            lines += ["\\bottomrule", "\\end{tabular}", ""]
    if data.notes:
        lines += ["\\paragraph{Notes.}", "\\begin{itemize}"]
        lines += [f"  \\item {t(n)}" for n in data.notes]
        lines += ["\\end{itemize}", ""]
    for table in tables:
        if "tex" in table.targets:
            lines += [f"\\input{{tables/{table.name}.tex}}", ""]
    cap = t(caption(data))
    for name, rel in pdfs.items():
        lines += [
            "\\begin{figure}[t]",
            "\\centering",
            f"\\includegraphics[width=\\linewidth]{{{rel}}}",
            f"\\caption{{{t(name.replace('_', ' '))}: {cap}}}",
            f"\\label{{fig:{name.replace('_', '-')}}}",
            "\\end{figure}",
            "",
        ]
    return "\n".join(lines)


def write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


__all__ = [
    "caption",
    "citation",
    "render_html",
    "render_markdown",
    "render_tex",
    "run_provenance",
    "write_text",
]
