"""`replay dashboard [RUNS_DIR]`: the Streamlit app over a folder of run directories.

Starts `streamlit run dashboards/app.py` headless (through `dashboards.serve`, which imports
the heavy libraries first), bound to 127.0.0.1 on a free port, with
usage statistics off, and prints the address. The runs folder travels to the app both as the
script argument after `--` and in $REPLAY_RUNS_DIR.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from replay.address import port_problem
from replay.commands.common import console, fail
from replay.lifeline import pdeathsig_preexec

HOST = "127.0.0.1"
RUNS_DIR_ENV = "REPLAY_RUNS_DIR"  # read by dashboards.paths


def app_script() -> Path:
    """The dashboard's entry file, found through the installed package."""
    import dashboards

    return Path(dashboards.__file__).resolve().parent / "app.py"


def free_port(host: str = HOST) -> int:
    """A port the OS reports free on `host` (bind to 0, read it back, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_is_free(port: int, host: str = HOST) -> bool:
    """Whether a server could listen on `port`: like the server, with SO_REUSEADDR, so a
    port whose last connections linger in TIME_WAIT counts as free (it is, for a server)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def streamlit_command(script: Path, runs_dir: Path, port: int) -> list[str]:
    """The streamlit command line; every server option explicit so no user config changes it."""
    return [
        sys.executable,
        "-m",
        "dashboards.serve",  # streamlit, with the heavy imports done before the first visit
        "run",
        str(script),
        "--server.headless",
        "true",
        "--server.address",
        HOST,
        "--server.port",
        str(port),
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--client.toolbarMode",
        "viewer",  # no "Deploy" button: this is a local viewer
        "--",
        str(runs_dir),
    ]


def register(app: typer.Typer) -> None:
    @app.command("dashboard")
    def _cmd(
        runs_dir: Annotated[
            Path, typer.Argument(help="Folder holding run directories (default: ./runs).")
        ] = Path("runs"),
        port: Annotated[
            int, typer.Option("--port", help="Port on 127.0.0.1 (default: a free one).")
        ] = 0,
    ) -> None:
        """Open the side-by-side replay dashboard over RUNS_DIR (Streamlit, 127.0.0.1)."""
        runs_dir = runs_dir.expanduser().resolve()
        if not runs_dir.is_dir():
            fail(
                f"{runs_dir}: {'a file, not a folder' if runs_dir.exists() else 'no such folder'}; "
                "pass the folder that holds your run directories "
                "(e.g. the --out of `replay run`)"
            )
        if (problem := port_problem(port, zero_picks_free=True)) is not None:
            fail(f"--port {problem}")
        script = app_script()
        if not script.is_file():
            fail(f"{script}: the dashboard's entry file is missing; reinstall the package")
        if port and not port_is_free(port):
            fail(f"--port {port}: {HOST}:{port} is already in use; pick another or leave it out")
        chosen = port or free_port()
        env = dict(os.environ, **{RUNS_DIR_ENV: str(runs_dir)})
        console.print(
            f"Dashboard over [bold]{runs_dir}[/] at http://{HOST}:{chosen}",
            highlight=False,
            soft_wrap=True,  # one line, so scripts can read the address
        )
        console.print("Press Ctrl+C to stop.", style="dim")
        # The server dies with this command, even a SIGKILLed one (replay.lifeline, as the
        # emulators and engine servers the harness starts).
        proc = subprocess.Popen(
            streamlit_command(script, runs_dir, chosen), env=env, preexec_fn=pdeathsig_preexec()
        )
        code = _wait(proc)
        if code not in (0, -2, 130):
            fail(f"streamlit exited with status {code}", code=1)


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _wait(proc: subprocess.Popen[bytes]) -> int:
    """Wait for streamlit; on Ctrl+C or SIGTERM stop it too, so no server is left behind."""
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        return proc.wait()
    except (KeyboardInterrupt, SystemExit):
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
