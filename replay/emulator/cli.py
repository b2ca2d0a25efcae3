"""The emulator's command line: `serve-sim` flags into an `EmulatorConfig`, then the server.

The emulator owns its command so that `python -m replay.emulator` (a child started by
`launch.py`) loads neither the rest of the command line nor rich; `replay serve-sim`
(`replay.commands.serve_sim`) registers the same command with its console's `fail` and print,
and with the options it shares with every run (`SharedOptions`) declared by the run spec's
fields, which this layer never imports (the spec is the layer above the executors).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError

from replay.emulator.config import (
    CHILD_CONFIG,
    DEFAULT_HASH_TOKENS,
    EmulatorConfig,
    EmulatorConfigError,
    emulator_config,
    from_child_args,
    make_cache,
)
from replay.profiles import ProfileError

Fail = Callable[[str], NoReturn]
Say = Callable[[str], None]


def plain_fail(message: str) -> NoReturn:
    """One `error: …` line on stderr, exit 2 (bad input), as `replay`'s commands do."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise typer.Exit(2)


def plain_say(line: str) -> None:
    print(line, flush=True)


def build_config(
    engine: str,
    model: str | None,
    host: str,
    port: int,
    time_scale: float | None,
    policy: str | None,
    served_model_name: str | None,
    blocks: int | None,
    block_tokens: int | None,
    max_batch: int | None,
    hash_tokens: int,
    faults: dict[str, object],
    token_scale: float | None = None,
    tokenizer: str | None = None,
    fail: Fail = plain_fail,
    replica: int | None = None,
    host_memory_gb: float | None = None,
    host_bandwidth_gbs: float | None = None,
    external_memory_gb: float | None = None,
    external_bandwidth_gbs: float | None = None,
    external_store: str | None = None,
) -> EmulatorConfig:
    """The config from flags (`emulator_config`, the one builder; a flag not given takes the
    model's default); a bad value fails naming its flag."""
    try:
        return emulator_config(
            engine, model=model, host=host, port=port, time_scale=time_scale, policy=policy,
            served_model_name=served_model_name, blocks=blocks, block_tokens=block_tokens,
            max_batch=max_batch, hash_tokens=hash_tokens, faults=faults,
            token_scale=token_scale, tokenizer=tokenizer, replica=replica,
            host_memory_gb=host_memory_gb or None, host_bandwidth_gbs=host_bandwidth_gbs,
            external_memory_gb=external_memory_gb or None,
            external_bandwidth_gbs=external_bandwidth_gbs, external_store=external_store,
        )  # fmt: skip
    except EmulatorConfigError as e:
        fail(str(e))


def serve_child(args: list[str]) -> bool:
    """Serve the config a parent process built, checked and handed over whole
    (`EmulatorConfig.child_args`); False: `args` are `serve-sim` flags instead."""
    try:
        cfg = from_child_args(args)
    except ValidationError as e:  # not a config a parent wrote: say why, no traceback
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "the config"
        msg = str(err["msg"]).removeprefix("Value error, ")
        plain_fail(f"{CHILD_CONFIG} (a config that replay's launcher writes): {where}: {msg}")
    if cfg is None:
        return False
    _serve(cfg, plain_fail, plain_say)
    return True


def bind_problem(e: OSError, host: str, port: int) -> str:
    """Why the server could not listen, naming the flag to change: --host when the address
    does not resolve or is none of this machine's (it used to blame `--port 0`), else
    --port (in use, or a privileged port)."""
    # asyncio words a failed bind "error while attempting to bind on address (…): …": the
    # system's words for its errno say it shorter (a resolver's errno is negative).
    why = os.strerror(e.errno) if e.errno and e.errno > 0 else e.strerror or str(e)
    if isinstance(e, socket.gaierror):
        return (
            f"--host {host}: does not resolve to an address ({why}); give an address of this "
            "machine, e.g. 127.0.0.1 (loopback) or 0.0.0.0 (every interface)"
        )
    if e.errno == errno.EADDRNOTAVAIL:
        return (
            f"--host {host}: cannot be bound: no interface of this machine has that address "
            f"({why}); give one it has, e.g. 127.0.0.1 (loopback) or 0.0.0.0 (every interface)"
        )
    return f"--port {port}: cannot listen on {host}: {why}; pick another port, or 0 for a free one"


def _serve(cfg: EmulatorConfig, fail: Fail, say: Say) -> None:
    """Check the cache and tokenizer, then serve `cfg` until stopped."""
    import asyncio

    from replay.emulator.launch import READY_PREFIX
    from replay.emulator.server import serve  # the server's imports: only to serve
    from replay.emulator.tokenizer import load_tokenizer
    from replay.sim.cache.tiers import TierError

    try:
        make_cache(cfg, cfg.resolved_profile())
    except ProfileError as e:  # a child's config names a profile that is gone
        fail(f"--model: {e}")
    except TierError as e:  # it names its flag (--host-memory-gb)
        fail(str(e))
    except ValueError as e:
        fail(f"--policy {cfg.policy_name}: {e}")
    try:
        load_tokenizer(cfg.tokenizer, cfg.resolved_profile().vocab_size)
    except ValueError as e:
        fail(str(e))

    def ready(url: str) -> None:
        profile = cfg.resolved_profile()
        say(
            f"{READY_PREFIX} {url}  engine={cfg.engine} policy={cfg.policy_name} "
            f"model={profile.name} blocks={profile.blocks_per_engine}x"
            f"{profile.block_tokens} time-scale={cfg.time_scale:g}"
            + (f" host-memory={cfg.host_memory_gb:g}GiB" if cfg.host_memory_gb else "")
        )

    try:
        asyncio.run(serve(cfg, make_cache, ready))
    except OSError as e:
        fail(bind_problem(e, cfg.host, cfg.port))
    except KeyboardInterrupt:
        with contextlib.suppress(Exception):
            say("stopped")


@dataclass(frozen=True)
class SharedOptions:
    """serve-sim's options that are settings of any run, not the emulator's alone, each a
    typer option given as its parameter's default: the model, its clock, the trace's token
    scale, the cache size and its host-memory tier. `replay serve-sim` passes the run spec's
    (`replay run` and `replay simulate` take them under the same names:
    replay.commands.serve_sim), and `check`, which refuses a value outside its field's range
    (the message, naming the flag; None: fine); the emulator's own process (`python -m
    replay.emulator`) declares them from its config's fields (`own_options`); a child that
    `launch.py` starts gets its checked config whole instead (`EmulatorConfig.child_args`)."""

    model: Any
    time_scale: Any
    token_scale: Any
    blocks: Any
    host_memory_gb: Any
    host_bandwidth_gbs: Any
    external_memory_gb: Any
    external_bandwidth_gbs: Any
    external_store: Any
    check: Callable[[dict[str, Any]], str | None] = lambda _values: None


def _own(key: str, *names: str) -> Any:
    return typer.Option(None, *names, help=EmulatorConfig.model_fields[key].description)


def own_options() -> SharedOptions:
    """The shared options as the emulator's config names them (the spec's flags and older
    names: --blocks is --capacity-blocks)."""
    return SharedOptions(
        model=_own("model", "--model"),
        time_scale=_own("time_scale", "--time-scale"),
        token_scale=_own("token_scale", "--token-scale"),
        blocks=_own("blocks", "--capacity-blocks", "--blocks"),
        host_memory_gb=_own("host_memory_gb", "--host-memory-gb"),
        host_bandwidth_gbs=_own("host_bandwidth_gbs", "--host-bandwidth-gbs"),
        external_memory_gb=_own("external_memory_gb", "--external-memory-gb"),
        external_bandwidth_gbs=_own("external_bandwidth_gbs", "--external-bandwidth-gbs"),
        external_store=_own("external_store", "--external-store"),
    )


# serve-sim's own options (the shared ones: `SharedOptions`).
Engine = Annotated[str, typer.Option("--engine", help="flashstate, vllm or sglang")]
Port = Annotated[int, typer.Option("--port", help="port to listen on (0: any free port)")]
Host = Annotated[str, typer.Option("--host", help="address to bind")]
Policy = Annotated[
    str | None,
    typer.Option("--policy", help="cache policy (default: the engine's own; kv-lru: plain KV)"),
]
ServedName = Annotated[
    str | None,
    typer.Option("--served-model-name", help="model id to serve (default: the profile name)"),
]
BlockTokens = Annotated[
    int | None,
    typer.Option("--block-tokens", help="tokens per cache block (overrides the profile)"),
]
MaxBatch = Annotated[int | None, typer.Option("--max-batch", help="most running sequences")]
HashTokens = Annotated[int, typer.Option("--hash-tokens", help="prefix-hash granularity (tokens)")]
ErrorRate = Annotated[float, typer.Option("--error-rate", help="fraction answered 500")]
StallRate = Annotated[float, typer.Option("--stall-rate", help="fraction of streams stalled")]
StallS = Annotated[float, typer.Option("--stall-s", help="stall length (wall seconds)")]
CrashAfter = Annotated[
    int | None, typer.Option("--crash-after", help="exit hard when request N+1 arrives")
]
SlowStartS = Annotated[
    float, typer.Option("--slow-start-s", help="answer 503 for this many seconds after start")
]
EarlyStop = Annotated[
    float,
    typer.Option("--early-stop-rate", help="fraction of generations ending at half max tokens"),
]
LieCached = Annotated[
    float,
    typer.Option(
        "--lie-cached-rate",
        help="fraction reporting a full cache hit while computing the whole prompt",
    ),
]
FaultSeed = Annotated[int, typer.Option("--fault-seed", help="seed of the fault draws")]
Tokenizer = Annotated[
    str | None,
    typer.Option(
        "--tokenizer",
        help="text endpoints' tokenizer: Hugging Face folder, tokenizer.json or hub name "
        "(default: the built-in deterministic one)",
    ),
]
Replica = Annotated[
    int | None,
    typer.Option(
        "--replica",
        help="index among the engine's replicas: answered in an x-replay-replica header",
    ),
]


def register(
    app: typer.Typer,
    fail: Fail = plain_fail,
    say: Say = plain_say,
    shared: SharedOptions | None = None,
) -> None:
    """Add the `serve-sim` command to `app`. `fail` reports a bad flag and exits, `say` prints a
    line to stdout (plain by default; `replay serve-sim` passes its console's); `shared`: the
    options every run shares (default: the emulator's own, `own_options`)."""
    opts = shared or own_options()

    @app.command("serve-sim")
    def serve_sim(
        engine: Engine,
        model: str | None = opts.model,
        port: Port = 8000,
        host: Host = "127.0.0.1",
        time_scale: float | None = opts.time_scale,
        policy: Policy = None,
        served_model_name: ServedName = None,
        token_scale: float | None = opts.token_scale,
        blocks: int | None = opts.blocks,
        host_memory_gb: float | None = opts.host_memory_gb,
        host_bandwidth_gbs: float | None = opts.host_bandwidth_gbs,
        external_memory_gb: float | None = opts.external_memory_gb,
        external_bandwidth_gbs: float | None = opts.external_bandwidth_gbs,
        external_store: str | None = opts.external_store,
        block_tokens: BlockTokens = None,
        max_batch: MaxBatch = None,
        hash_tokens: HashTokens = DEFAULT_HASH_TOKENS,
        error_rate: ErrorRate = 0.0,
        stall_rate: StallRate = 0.0,
        stall_s: StallS = 30.0,
        crash_after: CrashAfter = None,
        slow_start_s: SlowStartS = 0.0,
        early_stop_rate: EarlyStop = 0.0,
        lie_cached_rate: LieCached = 0.0,
        fault_seed: FaultSeed = 0,
        tokenizer: Tokenizer = None,
        replica: Replica = None,
    ) -> None:
        """Serve an engine emulator: the simulator's engine model behind a real HTTP API."""
        faults: dict[str, object] = {
            "error_rate": error_rate, "stall_rate": stall_rate, "stall_s": stall_s,
            "crash_after": crash_after, "slow_start_s": slow_start_s, "seed": fault_seed,
            "early_stop_rate": early_stop_rate, "lie_cached_rate": lie_cached_rate,
        }  # fmt: skip
        host_tier: dict[str, Any] = {
            "host_memory_gb": host_memory_gb,
            "host_bandwidth_gbs": host_bandwidth_gbs,
            "external_memory_gb": external_memory_gb,
            "external_bandwidth_gbs": external_bandwidth_gbs,
            "external_store": external_store,
        }
        if refused := opts.check(host_tier):
            fail(refused)
        cfg = build_config(
            engine, model, host, port, time_scale, policy, served_model_name, blocks,
            block_tokens, max_batch, hash_tokens, faults, token_scale, tokenizer, fail,
            replica, **host_tier,
        )  # fmt: skip
        _serve(cfg, fail, say)
