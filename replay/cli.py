"""The `replay` command line: the root app, with one module per command group."""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperOption

from replay import __version__
from replay.commands import (
    dashboard,
    engines,
    plan_host,
    price,
    report,
    run,
    serve_sim,
    simulate,
    slo_search,
    traces,
)

_display_type_rich = TyperOption.display_type_rich


def _no_type_for_switches(self: TyperOption, ctx: Any) -> str | None:
    """A flag takes no value, so the help shows no type beside it (typer's rich help prints
    `--json <bool>`, `--help <bool>`; its plain help already leaves flags and counters out,
    `TyperOption.get_help_record`). Every option that takes a value shows its type as before."""
    if self.is_flag or self.count:
        return None
    return _display_type_rich(self, ctx)


# On the class, so that every flag of every command has it, --help and --version included
# (typer builds its options itself and takes no option class).
TyperOption.display_type_rich = _no_type_for_switches  # type: ignore[method-assign]

app = typer.Typer(
    name="replay",
    help="Replay coding-agent traces against LLM engines, measure prefix caching, price it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"replay {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Agent-trace replay harness."""
    # The environment's one setting of ours, checked where it enters: a REPLAY_CONFIG_DIR that
    # is a file was blamed on whichever flag first read a config (`--model`).
    from replay.config_paths import config_dir_problem

    if (problem := config_dir_problem()) is not None:
        from replay.commands.common import fail

        fail(problem)


for module in (run, simulate, slo_search, plan_host, serve_sim, traces, price, report, dashboard,
               engines):  # fmt: skip
    module.register(app)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:  # Ctrl-C outside a command's own handling: no traceback
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
