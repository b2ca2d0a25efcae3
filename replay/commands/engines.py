"""`replay engines list|show|launch|preflight`: the systems under test, as bundled configs."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from replay.commands.common import console, err_console, fail

if TYPE_CHECKING:
    from replay.engines.configs import EngineConfig
    from replay.engines.launch import RunningServer
    from replay.engines.preflight import PreflightReport

# The engine configs, the launcher and the client's preflight are imported where they are
# used, so that `replay engines ... --help` loads none of them (pydantic models, aiohttp):
# tests/unit/replay/test_cli.py.

app = typer.Typer(
    help="Engine configs for the systems under test: list, show, launch, preflight.",
    no_args_is_help=True,
)


def _check_port(port: int | None) -> None:
    """A `--port` out of 1..65535 refused naming it (0 too: launch reads it as "not given",
    so it picks no free port); it used to reach the server, which died with a traceback."""
    from replay.address import port_problem

    if port is not None and (problem := port_problem(port)) is not None:
        fail(f"--port {problem}")


def _check_url(url: str, where: str) -> None:
    """An engine URL (only http(s), with a host and a port in range), refused naming `where`
    (the argument as given, its credentials masked)."""
    from replay.address import url_problem

    if (problem := url_problem(url)) is not None:
        fail(f"{where}: {problem}")


def _load(name: str) -> EngineConfig:
    from replay.engines.configs import EngineConfigError, load_engine_config

    try:
        return load_engine_config(name)
    except EngineConfigError as e:
        fail(str(e))


@app.command("list")
def list_cmd() -> None:
    """Every config in configs/engines/, one row each."""
    from rich.table import Table

    from replay.engines.configs import EngineConfigError, load_all_engine_configs

    try:
        configs, errors = load_all_engine_configs()
    except EngineConfigError as no_folder:  # no folder, or none in it: not an empty table
        fail(str(no_folder))
    table = Table(title="engine configs (configs/engines/)")
    table.add_column("name", no_wrap=True)
    table.add_column("engine", no_wrap=True)
    table.add_column("adapter")
    table.add_column("hardware")
    table.add_column("source", overflow="fold")
    for c in configs:
        hw = "CPU" if c.hardware.gpus == 0 else f"{c.hardware.gpus}×{c.hardware.gpu_type}"
        src = c.source
        pin = f"{src.repo}@{src.commit}" if src.type == "git" else src.describe()
        table.add_row(c.name, c.engine, c.adapter, f"{hw} TP{c.hardware.tensor_parallel_size}", pin)
    console.print(table)
    for e in errors:
        err_console.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
    if errors:
        raise typer.Exit(2)


@app.command("native")
def native_cmd(
    python: Annotated[
        str | None, typer.Option("--python", help="interpreter with vLLM (default: found)")
    ] = None,
) -> None:
    """Which vLLM the native cache policies (`vllm-native`) run, and its version."""
    from replay.sim.native.worker import NativeError, Worker

    try:
        w = Worker.start(python)
    except NativeError as e:
        fail(escape(str(e)))
    try:
        console.print(f"vllm-native: vLLM {w.version} from {w.found.python} ({w.found.how})")
        flags = ", ".join(w.fork_flags) or "none (not the FlashState fork)"
        console.print(f"FlashState fork flags known: {flags}")
    finally:
        w.close()


@app.command("show")
def show_cmd(
    name: Annotated[str, typer.Argument(help="config name (configs/engines/NAME) or a YAML path")],
    port: Annotated[int | None, typer.Option("--port", help="render with this port")] = None,
) -> None:
    """The resolved serve command and everything else the config says."""
    from replay.engines.configs import render_command

    _check_port(port)
    cfg = _load(name)
    cmd = render_command(cfg, port=port)
    console.print(f"[bold]{cfg.name}[/]  {cfg.description}", highlight=False)
    console.print(
        f"kind {cfg.kind} · engine name {cfg.engine} · adapter {cfg.adapter}", highlight=False
    )
    hw = cfg.hardware
    console.print(
        f"hardware: {hw.gpus} × {hw.gpu_type or 'CPU'}, tensor parallel {hw.tensor_parallel_size}",
        highlight=False,
    )
    console.print(
        f"model: {cfg.resolved_model()}  (request name: {cfg.model_name})", highlight=False
    )
    src = cfg.source
    console.print(f"source: {src.describe()}", highlight=False)
    if src.type == "git":
        for sm in src.submodules:
            pin = sm.commit or sm.branch
            console.print(f"  submodule {sm.path}: github.com/{sm.repo}@{pin}", highlight=False)
    if src.install:
        console.print(f"install: {src.install}", highlight=False)
    if cmd.env:
        env = " ".join(f"{k}={v}" for k, v in cmd.env.items())
        console.print(f"env: {env}", highlight=False)
    console.print("command:")
    # Plain print keeps the command copy-pasteable: no wrapping, no markup.
    typer.echo(cmd.shell())
    ex = cfg.expect
    console.print(
        f"preflight expects: cached tokens reported={ex.cached_tokens_reported}, "
        f"prefix caching={ex.prefix_caching}, token-id prompts={ex.token_id_prompts}, "
        f"/metrics={ex.metrics}, block size={ex.block_size or 'any'}",
        highlight=False,
    )
    for note in cfg.notes:
        console.print(f"note: {note}", highlight=False)


class _Interrupted(Exception):
    pass


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise _Interrupted(signal.Signals(signum).name)


@app.command("launch")
def launch_cmd(
    name: Annotated[str, typer.Argument(help="config name or YAML path")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print the command, run nothing")
    ] = False,
    port: Annotated[
        int | None, typer.Option("--port", help="port (default: the config's serve.port)")
    ] = None,
    host: Annotated[
        str | None, typer.Option("--host", help="bind address (default: the config's)")
    ] = None,
    python: Annotated[
        str | None, typer.Option("--python", help="interpreter that has the engine installed")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="model path or id instead of the config's")
    ] = None,
    log_file: Annotated[
        Path | None, typer.Option("--log-file", help="server log (default: runs/engines/)")
    ] = None,
    preflight: Annotated[
        bool, typer.Option("--preflight/--no-preflight", help="run preflight once healthy")
    ] = True,
) -> None:
    """Start the engine locally, wait for health, run preflight, print the endpoint line for
    `replay run`, and keep serving until Ctrl-C (which stops the server's whole process group)."""
    from replay.engines.configs import render_command
    from replay.engines.launch import LaunchError, start_server

    _check_port(port)
    cfg = _load(name)
    if model:
        cfg = cfg.with_model(model)
    if dry_run:
        typer.echo(render_command(cfg, port=port, python=python, host=host).shell())
        return
    log_path = (
        log_file or Path("runs") / "engines" / f"{cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    )
    try:
        server = start_server(cfg, log_path, port=port, python=python, host=host)
    except LaunchError as e:
        fail(str(e))
    # SIGTERM (e.g. from a test harness or systemd) must stop the server like Ctrl-C does.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        _serve(cfg, server, preflight)
    except (KeyboardInterrupt, _Interrupted):
        console.print("stopping the server (process group)…")
    finally:
        code = server.stop()
        console.print(f"server stopped (exit code {code})", highlight=False)


def _serve(cfg: EngineConfig, server: RunningServer, preflight: bool) -> None:
    from replay.engines.launch import LaunchError, wait_healthy

    console.print(server.command.shell(False), highlight=False, soft_wrap=True)
    # Machine-readable lines (tests and scripts parse them): plain echo, never wrapped.
    typer.echo(f"server pid {server.pid} (process group {server.pid}); log {server.log_path}")
    console.print(
        f"waiting for {server.url}{cfg.serve.health_path} "
        f"(up to {cfg.serve.startup_timeout_s:.0f} s)…",
        highlight=False,
    )
    try:
        took = wait_healthy(server)
    except LaunchError as e:
        err_console.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    console.print(f"healthy after {took:.1f} s", highlight=False)
    if preflight and not _preflight_report(server.url, cfg):
        raise typer.Exit(1)
    typer.echo(cfg.endpoint_arg(server.url))
    # ... and the log, so a run records the engine's last error should it die.
    typer.echo(f"--engine-log {cfg.engine}={server.log_path}")
    if cfg.hardware.gpus > 1:
        console.print(
            f"(per-GPU metrics need the GPU count: replay engines run-config "
            f"{cfg.name}={server.url} --out FILE, then replay run --config FILE)",
            highlight=False,
            soft_wrap=True,
        )
    console.print("serving; press Ctrl-C to stop")
    while server.alive():
        time.sleep(1.0)
    last = server.last_error()
    err_console.print(
        f"[bold red]error:[/] the server exited by itself with code {server.process.returncode}"
        f"{f' ({last})' if last else ''}; log {server.log_path}:\n{server.log_tail()}",
        highlight=False,
    )
    raise typer.Exit(1)


# Preflight checks a config may declare off (its `expect` block); the rest always count.
_EXPECT_FIELD = {
    "cached-token reporting": "cached_tokens_reported",
    "prefix caching": "prefix_caching",
    "token-id prompts": "token_id_prompts",
    "generated ids returned": "token_id_prompts",
    "metrics readable": "metrics",
}


def judge(report: PreflightReport, cfg: EngineConfig | None) -> list[str]:
    """What is wrong with `report` given the config's expectations (empty: fit to run).
    A check the config expects off does not count; a block size other than the expected
    one does (the engine is not configured as the config says)."""
    problems: list[str] = []
    for c in report.checks:
        field = _EXPECT_FIELD.get(c.name)
        if cfg is not None and field and not getattr(cfg.expect, field):
            continue
        if c.required and not c.ok:
            state = "skipped" if c.ok is None else "failed"
            problems.append(f"{c.name} {state}: {c.detail}" + (f" Fix: {c.fix}" if c.fix else ""))
    want = cfg.expect.block_size if cfg is not None else None
    if want is not None and report.block_size != want:
        problems.append(
            f"block size: the config expects {want} tokens but /metrics reports "
            f"{report.block_size or 'none'}; check the model and --block-size flags"
        )
    return problems


def _preflight_report(url: str, cfg: EngineConfig | None, kind: str = "vllm") -> bool:
    """Run the live client's preflight against `url`, print each check; True if fit."""
    import asyncio

    from replay.engines.preflight import preflight
    from replay.redact import Scrubber, redact_url

    if cfg is not None:
        kind = cfg.kind
    model = cfg.model_name if cfg is not None else None
    shown = redact_url(url) or url
    console.print(f"preflight ({kind}) against {shown}…", highlight=False)
    report = asyncio.run(preflight(url, kind, model))
    scrub = Scrubber.for_engines([url], [])
    for c in report.checks:
        mark = {True: "[green]ok[/]", False: "[red]FAIL[/]", None: "[yellow]skip[/]"}[c.ok]
        detail = scrub.text(c.detail)
        console.print(f"  {mark} {c.name}: {escape(detail)}", highlight=False, soft_wrap=True)
    problems = judge(report, cfg)
    if problems:
        err_console.print(f"[bold red]preflight failed[/] for {escape(shown)}:", highlight=False)
        for p in problems:
            err_console.print(f"  - {escape(scrub.text(p))}", highlight=False, soft_wrap=True)
        return False
    console.print(
        f"preflight passed: model {report.model}, block size {report.block_size or 'n/a'}",
        highlight=False,
    )
    return True


@app.command("preflight")
def preflight_cmd(
    target: Annotated[
        str, typer.Argument(help="config name (its default port on loopback) or a base URL")
    ],
    kind: Annotated[
        str, typer.Option("--kind", help="adapter kind for a URL: vllm, flashstate, sglang, openai")
    ] = "vllm",
) -> None:
    """Check a running server is fit for a replay (reachable, model, token ids, cached-token
    reporting, prefix caching, /metrics)."""
    from replay.address import is_url
    from replay.engines.adapters import adapter_kinds
    from replay.redact import redact_url

    cfg: EngineConfig | None = None
    if kind not in adapter_kinds():
        fail(f"--kind {kind!r}: not an adapter kind (known: {', '.join(adapter_kinds())})")
    if is_url(target):  # any scheme: ftp://x is a URL refused as such, not a missing file
        _check_url(target, redact_url(target) or target)
        url = target.rstrip("/")
    else:
        cfg = _load(target)
        url = f"http://127.0.0.1:{cfg.serve.port}"
    if not _preflight_report(url, cfg, kind):
        raise typer.Exit(1)


@app.command("run-config")
def run_config_cmd(
    pairs: Annotated[
        list[str],
        typer.Argument(help="CONFIG=URL per running engine, e.g. vllm-glm53-b200=http://h:8002"),
    ],
    out: Annotated[
        Path | None, typer.Option("--out", help="write the YAML here (default: print it)")
    ] = None,
) -> None:
    """Write the engines block of a `replay run --config` file from engine configs and the URLs
    their servers answer on, so the run records each engine's kind, model, GPUs and GPU type
    (per-GPU metrics and prices need them; `--endpoint` alone assumes one GPU)."""
    import yaml

    from replay.address import is_url
    from replay.redact import redact_url

    entries = []
    for pair in pairs:
        name, sep, url = pair.partition("=")
        if not sep or not is_url(url):
            fail(
                f"'{pair}': expected CONFIG=URL with an http(s) URL, e.g. "
                "vllm-cpu-tiny=http://127.0.0.1:8000"
            )
        _check_url(url, f"'{name}={redact_url(url)}'")
        entries.append(_load(name).run_entry(url.rstrip("/")))
    names = [e["name"] for e in entries]
    if len(set(names)) != len(names):
        fail(f"engine names repeat ({', '.join(map(str, names))}): one server per engine name")
    refs = _credentials_to_env(entries)
    text = yaml.safe_dump({"engines": entries}, sort_keys=False)
    if out is None:
        typer.echo(text, nl=False)
    else:
        from replay.userpaths import PathProblem, write_text_output

        try:
            write_text_output(out, text)
        except PathProblem as e:
            fail(str(e))
        console.print(f"wrote {out}; run with: replay run --config {out} ...", highlight=False)
    for name, var, what in refs:
        err_console.print(
            f"[yellow]notice:[/] the URL of {name} carried credentials; they are not written: "
            + (
                f"the URL reads ${{{var}}}@host, so export {var}='user:password'"
                if what == "userinfo"
                else f"its {what} reads ${{{var}}}, so export {var}=<the value>"
            )
            + " before `replay run`",
            highlight=False,
            soft_wrap=True,
        )


def _credentials_to_env(entries: list[dict[str, object]]) -> list[tuple[str, str, str]]:
    """Each entry's URL userinfo, and the value of a secret-named query parameter
    (`?key=…`), replaced by environment-variable references (in place); the (engine,
    variable, what) triples replaced."""
    from replay.redact import query_with_env_ref, url_with_env_ref

    replaced = []
    for e in entries:
        tag = re.sub(r"[^A-Za-z0-9]", "_", str(e["name"])).upper()
        var = "REPLAY_AUTH_" + tag
        e["url"], changed = url_with_env_ref(str(e["url"]), var)
        if changed:
            replaced.append((str(e["name"]), var, "userinfo"))
        key = "REPLAY_KEY_" + tag
        e["url"], value = query_with_env_ref(str(e["url"]), key)
        if value is not None:
            param = str(e["url"]).split("?", 1)[1].split("=${", 1)[0].rsplit("&", 1)[-1]
            replaced.append((str(e["name"]), key, f"query parameter {param}"))
    return replaced


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="engines")
