"""Router policies for an engine of N replicas, shared by the client, the emulator fleet and
the simulator (issue 26). See replay.fleet.base for the interface."""

from __future__ import annotations

from replay.fleet.base import (
    Decision,
    Param,
    PrefixView,
    ReplicaView,
    Resumable,
    Router,
    RouterContext,
    RouteRequest,
)
from replay.fleet.book import Fleet, LoadBook, Ticket
from replay.fleet.registry import (
    DEFAULT_ROUTER,
    EXTERNAL,
    ROUTERS,
    UnknownRouter,
    make_router,
    router_names,
)

__all__ = [
    "DEFAULT_ROUTER",
    "EXTERNAL",
    "ROUTERS",
    "Decision",
    "Fleet",
    "LoadBook",
    "Param",
    "PrefixView",
    "ReplicaView",
    "Resumable",
    "RouteRequest",
    "Router",
    "RouterContext",
    "Ticket",
    "UnknownRouter",
    "make_router",
    "router_names",
]
