"""`replay run`'s fleet and process flags on the run's spec (issue 26): `--router P`,
`--replicas N` (emulators), `--endpoint NAME=URL1,URL2,...` (already in the engine spec's
`urls`), `--workers K` and `--ray ADDRESS`; each bad combination is refused naming its flag.

The spec keeps them (`EngineRun.replicas` / `.router`, `RunSpec.workers` / `.ray`), so the
manifest records them and `--resume` continues with them; `fleets_of` turns them into the
client's `FleetSpec`s once the URLs are known (an emulated fleet's come from its launcher):
the command line hands the client those, never the spec. `replay simulate` refuses a router
over no replicas with the same words (`no_replicas`).
"""

from __future__ import annotations

from replay.client.fleet import EXTERNAL, FleetSpec
from replay.fleet.registry import DEFAULT_ROUTER
from replay.runspec.fields import EngineShape
from replay.runspec.model import EngineRun, RunSpec
from replay.runspec.resolve import FLAGS, Layer, SpecError, build

_EXTERNAL_EMULATED = (
    "--router external reads the replica from a real router in front of the engines: give "
    "the router's URL with --endpoint NAME=URL (emulators: --replicas N with a router the "
    "client runs, e.g. --router cache_aware)"
)


class FleetFlagError(ValueError):
    """A fleet or process flag that cannot apply; the message names the flag."""


def no_replicas(router: str, simulated: bool = False) -> str:
    """The refusal of `--router` with no replicas to route between: `replay run`'s (an
    engine of one URL, or emulators without `--replicas`) and `replay simulate`'s (no
    `--replicas`; issue 36: it ran one replica silently), each naming what to give."""
    give = (
        "--replicas N (a comma list sweeps)"
        if simulated
        else "--endpoint NAME=URL1,URL2,... (or --replicas N with emulators)"
    )
    return f"--router {router}: no engine has replicas to route between; give {give}"


def _check_shape(router: str | None, replicas: int | None) -> None:
    """--router and --replicas on their fields (`EngineShape`), as `replay simulate` checks
    them."""
    try:
        build(EngineShape, [Layer(FLAGS, {"router": router, "replicas": replicas})])
    except SpecError as e:
        raise FleetFlagError(str(e)) from None


def _engine(e: EngineRun, emulated: bool, router: str | None, replicas: int | None) -> EngineRun:
    urls = e.engine.urls or []
    if router == EXTERNAL:
        if emulated:
            raise FleetFlagError(_EXTERNAL_EMULATED)
        if len(urls) > 1:
            raise FleetFlagError(
                f"--router external: engine {e.name} names {len(urls)} URLs; give the "
                "router's one URL (it knows its workers), or drop --router external to let "
                "the client route"
            )
        return e.model_copy(update={"router": EXTERNAL, "replicas": 1})
    n = len(urls) if urls else (replicas or e.replicas if emulated else 1)
    if n > 1:
        return e.model_copy(update={"replicas": n, "router": router or e.router or DEFAULT_ROUTER})
    return e


def apply_fleet_flags(
    spec: RunSpec,
    *,
    router: str | None = None,
    replicas: int | None = None,
    workers: int | None = None,
    ray: str | None = None,
) -> RunSpec:
    """The spec with the fleet and process flags applied; FleetFlagError naming the flag."""
    _check_shape(router, replicas)
    if workers is not None and workers < 1:
        raise FleetFlagError(f"--workers {workers}: must be at least 1 (1: one process)")
    if replicas is not None and not spec.emulated:
        raise FleetFlagError(
            f"--replicas {replicas} starts that many emulators per engine; real engines name "
            "their replicas: --endpoint NAME=URL1,URL2,... (the client routes between them)"
        )
    if ray is not None and not ray.strip():
        raise FleetFlagError("--ray: give a Ray address (host:port, ray://host:port) or 'local'")
    engines = [_engine(e, spec.emulated, router, replicas) for e in spec.engines]
    if router is not None and router != EXTERNAL and not any(e.replicas > 1 for e in engines):
        raise FleetFlagError(no_replicas(router))
    update: dict[str, object] = {"engines": engines}
    if workers is not None:
        update["workers"] = workers
    if ray is not None:
        update["ray"] = ray
    return spec.model_copy(update=update)


def fleets_of(
    spec: RunSpec, emulated_urls: dict[str, list[str]] | None = None
) -> dict[str, FleetSpec]:
    """The client's fleets: each engine with a router, over its replica URLs (an emulated
    fleet's from its launcher, `emulated_urls`)."""
    out: dict[str, FleetSpec] = {}
    for e in spec.engines:
        if e.router is None:
            continue
        if e.router == EXTERNAL:
            urls = [e.engine.url or ""]
        elif emulated_urls is not None and e.name in emulated_urls:
            urls = emulated_urls[e.name]
        else:
            urls = list(e.engine.urls or [e.engine.url or ""])
        out[e.name] = FleetSpec(tuple(urls), e.router)
    return out


__all__ = ["DEFAULT_ROUTER", "FleetFlagError", "apply_fleet_flags", "fleets_of", "no_replicas"]
