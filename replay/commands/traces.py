"""`replay traces stats|synth|convert`: describe, generate and convert agent traces."""

from __future__ import annotations

import contextlib
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import typer
from rich.table import Table

from replay.commands.common import console, fail
from replay.traces import FORMATS, sample_path
from replay.userpaths import PathProblem, check_out_file

if TYPE_CHECKING:
    from replay.traces import Trace

# The trace loader and model (numpy) are imported where they are used, so that `replay traces
# ... --help` loads neither: tests/unit/replay/test_cli.py.

app = typer.Typer(help="Describe, generate and convert agent traces.", no_args_is_help=True)

SRC_HELP = (
    "A .jsonl or .jsonl.gz file, a folder of .json files, or a Hugging Face dataset id "
    "(hf:owner/name). Default: the bundled sample trace."
)


# `replay run` and `replay simulate` take seeds up to 2^63 - 1 (replay.runspec.fields.INT64_MAX);
# the same seed here names the same file there.
MAX_SEED = 2**63 - 1
# More sessions than anyone replays: 25,000 times the published corpus (393 sessions), days
# of generating at any scale (about 150 sessions a second at --scale 1000, 8 at --scale 1)
# and at least 100 GB even compressed (replay.traces.synth.estimated_bytes).
MAX_TRAJECTORIES = 10_000_000

OUT_OPTION: Any = typer.Option(
    ..., "--out", help="File to write (.jsonl, or .jsonl.gz to compress)."
)


def _load(src: str | None, strict: bool, fmt: str | None) -> Trace:
    from replay.traces import TraceError, load_trace

    try:
        return load_trace(src or sample_path(), strict=strict, fmt=fmt)
    except TraceError as exc:
        hint = "" if not strict else " (without --strict such inconsistencies are counted instead)"
        fail(f"{exc}{hint}")


def _fmt_option() -> Any:
    return typer.Option(
        None, "--format", help=f"Trace format, one of {', '.join(FORMATS)} (default: detected)."
    )


@app.command("stats")
def stats(
    src: str = typer.Argument(None, help=SRC_HELP, show_default=False),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
    strict: bool = typer.Option(
        False, "--strict", help="Fail on inconsistencies instead of counting them."
    ),
    fmt: str = _fmt_option(),
    compare_to: str = typer.Option(
        None,
        "--compare",
        help="Also compute the published figures of a real corpus (e.g. cc-traces-062126) "
        "the same way on this trace, at full size, and print them beside it with ratios.",
    ),
) -> None:
    """Trajectories, requests, prompt and output lengths, prefix reuse and tool gaps."""
    from replay.traces.reference import ReferenceError, compare, load_reference
    from replay.traces.scale import TraceScaleError, declared_scale
    from replay.traces.stats import trace_stats
    from replay.workload import DEFAULT_WORKLOAD

    ref = None
    if compare_to is not None:
        try:
            ref = load_reference(compare_to)
        except ReferenceError as e:
            fail(f"--compare: {e}")
    trace = _load(src, strict, fmt)
    figures = trace_stats(trace, DEFAULT_WORKLOAD.gap_cap_s)  # what a replay waits at most
    try:
        figures["token_scale"] = declared_scale(trace)  # None: not declared (full size)
    except TraceScaleError as e:
        fail(str(e))
    figures["source"] = trace.source
    figures["load_issue_examples"] = [str(i) for i in trace.issues[:10]]
    rows = None
    if ref is not None:
        from replay.traces.figures import corpus_figures

        try:
            rows = compare(corpus_figures(trace), ref)
        except ReferenceError as e:
            fail(str(e))
        figures["reference"] = ref.name
        figures["comparison"] = rows
    if as_json:
        typer.echo(orjson.dumps(figures, option=orjson.OPT_SERIALIZE_NUMPY).decode())
        return
    console.print(_stats_table(figures))
    if rows is not None and ref is not None:
        console.print(_compare_table(rows, ref.name, ref.tolerance, figures["token_scale"]))
    _print_issues(trace)


def _fmt_value(v: float, unit: str) -> str:
    if v != v:
        return "—"
    if unit == "share":
        return f"{v:.3f}" if v >= 0.1 else f"{v:.4f}"
    if unit == "s":
        return f"{v:,.1f}"
    return f"{v:,.0f}"


def _compare_table(rows: list[dict[str, Any]], name: str, tol: float, scale: Any) -> Table:
    at = f"; token lengths × {scale:g} (full size)" if scale else ""
    table = Table(title=f"beside {name} (published; ✗ = outside ±{tol:.0%}{at})")
    for col, justify in (("figure", "left"), ("this trace", "right"), (name, "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    table.add_column("ratio", justify="right")
    table.add_column("", justify="center")
    for r in rows:
        ratio = "—" if r["ratio"] != r["ratio"] else f"{r['ratio']:.2f}"
        table.add_row(
            r["label"],
            _fmt_value(r["trace"], r["unit"]),
            _fmt_value(r["reference"], r["unit"]),
            ratio,
            "" if r["within_tolerance"] else "✗",
        )
    return table


def _stats_table(f: dict[str, Any]) -> Table:
    scaled = f", token lengths ÷ {f['token_scale']:g}" if f.get("token_scale") else ""
    table = Table(
        title=f"trace {f['source']} ({f['format']}, {f['block_size']}-token blocks{scaled})"
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("trajectories", f"{f['trajectories']:,}"),
        ("requests (all)", f"{f['requests']:,}"),
        ("  top-level", f"{f['top_level_requests']:,}"),
        ("  inside subagents", f"{f['subagent_requests']:,} ({f['subagent_request_share']:.1%})"),
        ("subagents (max nesting)", f"{f['subagents']:,} ({f['max_subagent_depth']})"),
        (
            "prompt tokens mean / median",
            f"{f['mean_prompt_tokens']:,.0f} / {f['median_prompt_tokens']:,.0f}",
        ),
        ("prompt tokens p90 / max", f"{f['p90_prompt_tokens']:,.0f} / {f['max_prompt_tokens']:,}"),
        (
            "output tokens mean / median",
            f"{f['mean_output_tokens']:,.0f} / {f['median_output_tokens']:,.0f}",
        ),
        ("continuations (extend predecessor)", f"{f['continuation_share']:.1%}"),
        ("context edits", f"{f['context_edit_share']:.1%}"),
        ("fresh prompts (no shared prefix)", f"{f['fresh_share']:.1%}"),
        (
            "tool gap p50 / p90 / p99",
            f"{f['tool_gap_p50_s']:.1f} / {f['tool_gap_p90_s']:.1f} / {f['tool_gap_p99_s']:.1f} s",
        ),
        ("tool gap mean / max", f"{f['tool_gap_mean_s']:.1f} / {f['tool_gap_max_s']:,.0f} s"),
        (
            f"tool gaps over the {f['tool_gap_cap_s']:.0f} s cap",
            f"{f['tool_gap_over_cap_share']:.2%}",
        ),
        ("load issues", f"{f['load_issues']:,}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def _print_issues(trace: Trace) -> None:
    n = len(trace.issues)
    if not n:
        console.print("no load issues")
        return
    console.print(
        f"[yellow]{n} load issue(s)[/] (use --strict to fail on them); first {min(n, 5)}:"
    )
    for issue in trace.issues[:5]:
        console.print(f"  {issue}", highlight=False, soft_wrap=True)


@app.command("synth")
def synth(
    out: Path = OUT_OPTION,
    trajectories: int = typer.Option(393, "--trajectories", help="Top-level sessions to generate."),
    seed: int = typer.Option(0, "--seed", help="Random seed (same seed, same file)."),
    scale: float = typer.Option(1.0, "--scale", help="Divide every token length by this (>= 1)."),
) -> None:
    """Generate a Weka-format trace calibrated to the published cc-traces corpus."""
    from replay.traces.scale import TraceScaleError, check_scale
    from replay.traces.synth import SynthConfig, write_synth

    if trajectories < 1:
        fail(f"--trajectories must be at least 1, got {trajectories}")
    if trajectories > MAX_TRAJECTORIES:
        fail(
            f"--trajectories {trajectories:,}: must be at most {MAX_TRAJECTORIES:,} (25,000 "
            "times the published corpus's 393 sessions, days to generate); give fewer"
        )
    _check_seed(seed)
    try:
        check_scale(scale, "--scale")
    except TraceScaleError as e:
        fail(str(e))
    _check_out(out)
    _check_room(out, trajectories, scale)
    t0 = time.perf_counter()
    try:
        with _sigterm_stops(out):
            n = write_synth(out, SynthConfig(n_trajectories=trajectories, seed=seed, scale=scale))
    except PathProblem as e:
        fail(str(e))
    size = out.stat().st_size / 1e6
    console.print(
        f"wrote {n} sessions to {out} ({size:,.1f} MB) in {time.perf_counter() - t0:.1f} s"
    )


@app.command("convert")
def convert(
    src: str = typer.Argument(
        ..., help=SRC_HELP.replace(" Default: the bundled sample trace.", "")
    ),
    to: str = typer.Option(..., "--to", help="Output format: weka or mooncake."),
    out: Path = OUT_OPTION,
    strict: bool = typer.Option(
        False, "--strict", help="Fail on inconsistencies instead of counting them."
    ),
    fmt: str = _fmt_option(),
    scale: int = typer.Option(
        1,
        "--scale",
        help="Divide every token length by this whole number (Weka to Weka): a real corpus "
        "made to fit a small engine's context; the sessions declare it as token_scale.",
    ),
) -> None:
    """Convert between the Weka and Mooncake formats (what the target cannot hold is dropped)."""
    from replay.traces import TraceError
    from replay.traces.convert import (
        MOONCAKE_ARRIVALS,
        MOONCAKE_LOSSES,
        NOT_READ,
        WEKA_LOSSES,
        write_mooncake,
        write_weka,
    )

    if to not in FORMATS:
        fail(f"--to {to!r}: expected one of {', '.join(FORMATS)}")
    if scale < 1:
        fail(f"--scale {scale}: expected a whole number of at least 1 (it divides token lengths)")
    if scale > 1 and to != "weka":
        fail(f"--scale {scale}: only a Weka trace declares its scale; use --to weka")
    _check_out(out)  # before the (long) load
    _check_out_not_source(out, src)
    trace = _load(src, strict, fmt)
    if scale > 1:
        from replay.traces.scale import TraceScaleError, scale_trace

        try:
            trace = scale_trace(trace, scale)
        except TraceScaleError as exc:
            fail(str(exc))
    try:
        with _sigterm_stops(out):
            if to == "mooncake":
                n = write_mooncake(trace, out)
                what = f"{n:,} Mooncake rows"
            else:
                n = write_weka(trace, out)
                what = f"{n:,} Weka sessions"
    except (TraceError, PathProblem) as exc:
        fail(str(exc))
    scaled = f", token lengths ÷ {scale}" if scale > 1 else ""
    console.print(f"wrote {what} to {out}{scaled}")
    if trace.format != to:
        lost = WEKA_LOSSES if trace.format == "weka" else MOONCAKE_LOSSES
        console.print(f"dropped (the {to} format has no place for it): {lost}", highlight=False)
    if to == "mooncake":
        _warn_scale_dropped(trace)
    if trace.format == "mooncake" and to == "weka":
        console.print(f"kept: {MOONCAKE_ARRIVALS}", highlight=False)
    if trace.format == "weka":
        console.print(f"dropped (not read from Weka traces): {NOT_READ}", highlight=False)
    _print_issues(trace)


def _check_out(out: Path) -> None:
    try:
        check_out_file(out, "--out")
    except PathProblem as e:
        fail(f"{e} (a .jsonl or .jsonl.gz file)")


def _check_room(out: Path, trajectories: int, scale: float) -> None:
    """Refuse a synthetic trace larger than the free space where `out` goes (it used to write
    until the disk was full): the size is `estimated_bytes`' average for the scale."""
    from replay.traces.synth import estimated_bytes

    if out.exists() and not out.is_file():
        return  # a device such as /dev/null is written in place
    where = out.absolute().parent
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return  # the write names what is wrong with the place
    gz = out.name.endswith(".gz")
    need = estimated_bytes(trajectories, scale, gz)
    if need > free:
        kind = "compressed " if gz else ""
        fail(
            f"--trajectories {trajectories:,}: the {kind}trace would be about "
            f"{_size(need)} at --scale {scale:g}, more than the {_size(free)} free where "
            f"--out {out} goes, so it cannot write it whole; give fewer --trajectories, a "
            "larger --scale"
            f"{'' if gz else ', a .jsonl.gz name'} or another --out (nothing was written)"
        )


def _size(n: float) -> str:
    for unit, div in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= div:
            return f"{n / div:,.1f} {unit}"
    return f"{n / 1e3:,.1f} kB" if n >= 1e3 else f"{n:,.0f} bytes"


class _Terminated(BaseException):
    """SIGTERM arrived while a trace was being written (a BaseException, as KeyboardInterrupt
    is, so that no `except Exception` on the way keeps it)."""


@contextlib.contextmanager
def _sigterm_stops(out: Path) -> Iterator[None]:
    """While the block runs, SIGTERM (`timeout`, `kill`, a scheduler) stops the write the way
    Ctrl-C does: the exception unwinds `replay.userpaths.written`, which removes the partial
    `.NAME.part` file (SIGTERM's default ended the process at once and left it, however
    large), and the command ends with 143 (128 + SIGTERM). The previous handler comes back
    after the block."""

    def stop(signum: int, frame: object) -> None:
        raise _Terminated

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: signals cannot be handled here
        yield
        return
    try:
        yield
    except _Terminated:
        fail(f"stopped by SIGTERM before the trace was whole; nothing written to --out {out}", 143)
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _warn_scale_dropped(trace: Trace) -> None:
    """A Mooncake file has no place for a Weka trace's `token_scale`: say so, and how to
    replay it at the scale its lengths were made with."""
    from replay.traces.scale import TraceScaleError, declared_scale

    try:
        declared = declared_scale(trace)
    except TraceScaleError:
        declared = None  # several scales: scale_trace and replay name it where it matters
    if declared is None or declared == 1:
        return
    console.print(
        f"[yellow]dropped: token_scale {declared:g}[/] (the Mooncake format has no place for "
        f"it): the file's lengths are full size ÷ {declared:g} and nothing in it says so; "
        f"replay it with --token-scale {declared:g}, or convert to weka to keep it",
        highlight=False,
        soft_wrap=True,
    )


def _check_seed(seed: int) -> None:
    if seed < 0:
        fail(f"--seed {seed}: must be 0 or more")
    if seed > MAX_SEED:
        fail(
            f"--seed {seed}: must be at most {MAX_SEED} (2^63 - 1, the largest seed "
            "`replay run` and `replay simulate` take)"
        )


def _check_out_not_source(out: Path, src: str) -> None:
    """Refuse an `--out` that is the source file (however spelled: `./SRC`, a symlink, a hard
    link) or a file of the source folder: the converted trace would replace what it is read
    from, or join the folder's files."""
    from replay.traces.sources import overlap_with_source

    overlap = overlap_with_source(Path(src), out)
    if overlap is not None:
        fail(f"--out {out}: {overlap} {src}; choose another path for the converted trace")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="traces")
