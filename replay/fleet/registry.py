"""Router names, their classes and parameters: the one list every executor and flag reads."""

from __future__ import annotations

from collections.abc import Mapping

from replay.fleet.base import Router, RouterContext
from replay.fleet.cache_aware import CacheAware
from replay.fleet.scored import Dynamo, LlmD
from replay.fleet.simple import LeastLoad, RoundRobin, SessionHash
from replay.fleet.state_aware import StateAware

ROUTERS: dict[str, type[Router]] = {
    cls.name: cls
    for cls in (
        RoundRobin,
        LeastLoad,
        SessionHash,
        CacheAware,
        LlmD,
        Dynamo,
        StateAware,
    )
}


# The router of an engine of several replicas when none is named (`replay run`, `replay
# simulate`, the client's and the simulator's fleets).
DEFAULT_ROUTER = RoundRobin.name

# A real router in front of the replicas, whose choice the client reads back: a choice of
# `replay run --router`, not a policy here.
EXTERNAL = "external"


def router_names() -> tuple[str, ...]:
    return tuple(ROUTERS)


class UnknownRouter(ValueError):
    pass


def make_router(
    name: str, ctx: RouterContext, overrides: Mapping[str, object] | None = None
) -> Router:
    """The router `name` for `ctx.replicas` replicas; a clear error for an unknown name."""
    cls = ROUTERS.get(name)
    if cls is None:
        raise UnknownRouter(f"unknown router {name!r}; choose one of {', '.join(ROUTERS)}")
    if ctx.replicas < 1:
        raise ValueError(f"a fleet needs at least 1 replica, not {ctx.replicas}")
    return cls(ctx, overrides)
