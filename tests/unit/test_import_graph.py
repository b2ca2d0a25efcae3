"""The house has no import circles and no arrows running back up its layers.

Every module of `replay`, `analysis`, `pricing` and `dashboards` is parsed with `ast` (nothing
is imported), and every import statement counts wherever it stands: at module level, inside a
function, or under `if TYPE_CHECKING:`.

Layers, top to bottom (`LAYERS`; a module imports only its own layer and those below it, and
the rules of `_arrow_rules` say which neighbours never meet):
1. the command line: `replay.cli`, `replay.__main__`, `replay.commands.*` (only it prints with
   rich); nothing else imports it;
2. the run specification, `replay.runspec`: every setting once with its flag, default and
   check (an SLO's checked by `analysis.slo`); the command line resolves it and hands the
   executors what they run, so no executor imports it;
3. `dashboards`: reads `analysis`, `pricing` and the run directory's contract (`replay.rundir`,
   its models in `replay.rundir_models`);
4. `analysis`: reads run directories; never imports the executors that write them
   (`replay.client`, `replay.engines`, `replay.emulator`, `replay.sim`, `replay.traces`);
5. the executors, which never import the layers that read their output (`analysis`,
   `dashboards`): the client (`replay.client`) and its view of engines (`replay.engines`:
   adapters, preflight, scraping, configs, launch) reach every server over HTTP and never
   import the emulator server (`replay.emulator`), which imports neither of them; the
   simulator (`replay.sim`, the engine model the emulator serves) imports none of the three.
   The simulator is three layers of its own: the run driver and fleets (`replay.sim`'s top
   level, with the scheduler oracle `replay.sim.native.sched_oracle`,
   `replay.sim.native.crosscheck` and `replay.sim.native.agreement_table`, which drive whole
   runs or the agreement scripts' workloads) over the engine model
   (`replay.sim.engine`) over the cache model and its policies (`replay.sim.cache`, with the
   engines' own caches in `replay.sim.native` and the compiled build's loader
   `replay.sim.compiled`);
6. the workload, `replay.workload` (the replay rules), over the traces it replays
   (`replay.traces`), which never import it;
7. `replay.fleet` (router policies for an engine of N replicas, issue 26): a library below the
   executors, shared by all three, so it imports none of them nor the layers above them (it
   sees requests and replicas through its own views, replay.fleet.base);
8. `pricing`: imports nothing of ours.
Modules named in no layer (the run directory, records, profiles, prompts and other shared
pieces) are not placed by `LAYERS`; the rules that name them still hold.

Type-only imports (under `if TYPE_CHECKING:`) count for the layers (a module that names an
upper layer's types depends on it) and for circles too: two modules that name each other's
types are one piece of code in two files, whichever of the imports runs. A pair that must
call each other breaks the circle with a view (a `typing.Protocol` in the lower module) or by
moving the type they share into a module below both, never by hiding an import.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("replay", "analysis", "pricing", "dashboards")
COMMANDS = ("replay.cli", "replay.__main__", "replay.commands")
EXECUTORS = ("replay.client", "replay.engines", "replay.emulator", "replay.sim", "replay.traces")
SIM_CACHE = ("replay.sim.cache", "replay.sim.native", "replay.sim.compiled")
SIM_ENGINE = ("replay.sim.engine",)
# The parts of replay.sim.native that drive whole runs: the run driver's layer.
SIM_NATIVE_DRIVERS = (
    "replay.sim.native.sched_oracle",
    "replay.sim.native.crosscheck",
    "replay.sim.native.agreement_table",
)

# The layers, top to bottom (this module's docstring): the modules each holds.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the command line", COMMANDS),
    ("the run specification", ("replay.runspec",)),
    ("dashboards", ("dashboards",)),
    ("analysis", ("analysis",)),
    ("the executors", ("replay.client", "replay.engines", "replay.emulator", "replay.sim")),
    ("the workload", ("replay.workload",)),
    ("the traces", ("replay.traces",)),
    ("the router library", ("replay.fleet",)),
    ("pricing", ("pricing",)),
)
# The simulator's own layers, top to bottom.
SIM_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the run driver and fleets", ("replay.sim",)),
    ("the engine model", SIM_ENGINE),
    ("the cache model", SIM_CACHE),
)

# Known while other work of issue 33 lands; each is removed once its import is gone (the
# last test fails while one is listed that no longer exists).
KNOWN_CYCLES: set[frozenset[str]] = set()
KNOWN_ARROWS: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    line: int
    type_only: bool

    def __str__(self) -> str:
        where = f"{module_path(self.src)}:{self.line}"
        return f"{self.src} → {self.dst} ({where}{', type-only' if self.type_only else ''})"


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def module_path(name: str) -> str:
    return MODULES[name].relative_to(ROOT).as_posix()


def _type_only_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`) bodies."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        if name == "TYPE_CHECKING":
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _ours(name: str) -> str | None:
    """The module of ours `name` refers to (the longest known prefix), or None."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in MODULES:
            return cand
        parts.pop()
    return None


def _edges() -> list[Edge]:
    edges: list[Edge] = []
    for mod, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        type_only = _type_only_nodes(tree)
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    origin = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    origin = node.module or ""
                # `from pkg import sub` imports the submodule; `from mod import name`, mod.
                targets = [
                    f"{origin}.{a.name}" if f"{origin}.{a.name}" in MODULES else origin
                    for a in node.names
                ]
            else:
                continue
            for target in targets:
                dst = _ours(target)
                if dst is not None and dst != mod:
                    edges.append(Edge(mod, dst, node.lineno, id(node) in type_only))
    return edges


EDGES = _edges()


def _under(mod: str, prefixes: tuple[str, ...]) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def _cycles(edges: list[Edge]) -> list[list[Edge]]:
    """One cycle (as its edges) per strongly connected component of more than one module."""
    graph: dict[str, dict[str, Edge]] = defaultdict(dict)
    for e in edges:
        graph[e.src].setdefault(e.dst, e)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    sccs: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan; the graph is a few hundred modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc: set[str] = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.add(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(scc)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for scc in sccs:
        start = min(scc)
        # Breadth-first from `start` back to `start` inside the component: a shortest cycle.
        prev: dict[str, Edge] = {}
        frontier = [start]
        while frontier and start not in prev:
            nxt = []
            for v in frontier:
                for w, e in sorted(graph[v].items()):
                    if w in scc and w not in prev:
                        prev[w] = e
                        nxt.append(w)
            frontier = nxt
        path: list[Edge] = []
        v = start
        while True:
            e = prev[v]
            path.append(e)
            v = e.src
            if v == start:
                break
        out.append(path[::-1])
    return out


def _layer(mod: str, layers: tuple[tuple[str, tuple[str, ...]], ...]) -> int | None:
    """The index of the layer holding `mod` (the most specific prefix wins), or None."""
    best: tuple[int, int] | None = None
    for i, (_, prefixes) in enumerate(layers):
        for p in prefixes:
            if _under(mod, (p,)) and (best is None or len(p) > best[1]):
                best = (i, len(p))
    return None if best is None else best[0]


def _sim_layer(mod: str) -> int | None:
    if _under(mod, SIM_NATIVE_DRIVERS):
        return 0
    return _layer(mod, SIM_LAYERS) if _under(mod, ("replay.sim",)) else None


def _arrow_rules(e: Edge) -> str | None:
    """Why an import runs back up the layers, or None."""
    src, dst = e.src, e.dst
    up, down = _layer(src, LAYERS), _layer(dst, LAYERS)
    if up is not None and down is not None and down < up:
        return f"an import from {LAYERS[up][0]} up to {LAYERS[down][0]}, a layer above it"
    up, down = _sim_layer(src), _sim_layer(dst)
    if up is not None and down is not None and down < up:
        return f"in the simulator, an import from {SIM_LAYERS[up][0]} up to {SIM_LAYERS[down][0]}"
    if _under(dst, COMMANDS) and not _under(src, COMMANDS):
        return "only the command line imports the command line"
    if src.startswith("pricing") and not dst.startswith("pricing"):
        return "pricing imports nothing of ours"
    if src.startswith("analysis") and _under(dst, (*EXECUTORS, "dashboards")):
        return "analysis reads run directories, never the executors that write them"
    if src.startswith("dashboards") and not _under(
        dst, ("dashboards", "analysis", "pricing", "replay.rundir", "replay.rundir_models")
    ):
        return (
            "dashboards read only analysis, pricing and the run directory "
            "(replay.rundir, replay.rundir_models)"
        )
    if _under(src, EXECUTORS) and _under(dst, ("analysis", "dashboards")):
        return "an executor never imports the layers that read its output"
    client = ("replay.client", "replay.engines")
    if _under(src, client) and _under(dst, ("replay.emulator",)):
        return "the client reaches the emulator over HTTP, never by import"
    if _under(src, ("replay.emulator",)) and _under(dst, client):
        return "the emulator server imports neither the client nor its view of engines"
    if _under(src, ("replay.sim",)) and _under(dst, (*client, "replay.emulator")):
        return "the simulator (the engine model) imports neither the client nor the emulator"
    if _under(src, ("replay.fleet",)) and _under(dst, (*EXECUTORS, "analysis", "dashboards")):
        return "the router policies are a library below the executors: they import none of them"
    return None


def _group(cycle: list[Edge]) -> frozenset[str]:
    """The modules of a cycle's strongly connected group (a known group is listed whole)."""
    members = {e.src for e in cycle}
    for known in KNOWN_CYCLES:
        if members <= known and _cycles([e for e in EDGES if e.src in known and e.dst in known]):
            return known
    return frozenset(members)


def test_modules_were_found() -> None:
    assert {"replay.cli", "analysis", "pricing", "dashboards.app"} <= MODULES.keys()
    assert len(EDGES) > 300  # the parser sees the imports (a broken walk would pass vacuously)
    assert any(e.type_only for e in EDGES)
    # Imports inside functions are seen too.
    assert any(e.src == "replay.commands.run" and e.dst.startswith("analysis") for e in EDGES)


def test_no_import_cycles() -> None:
    cycles = _cycles(EDGES)
    new = [c for c in cycles if _group(c) not in KNOWN_CYCLES]
    assert not new, (
        "import cycles (break each; see this test's docstring):\n"
        + "\n".join("  " + " ⇒ ".join(str(e) for e in c) for c in new)
        + "\n(one shortest cycle per group of modules that import each other; fix and rerun)"
    )


def test_no_arrows_back_up_the_layers() -> None:
    bad = [
        f"  {e}: {why}"
        for e in EDGES
        if (why := _arrow_rules(e)) and (e.src, e.dst) not in KNOWN_ARROWS
    ]
    assert not bad, "imports running back up the layers:\n" + "\n".join(sorted(set(bad)))


def test_known_exceptions_are_still_needed() -> None:
    """An exception whose import is gone is removed from the list, so it cannot hide a new
    one."""
    cycles = {_group(c) for c in _cycles(EDGES)}
    arrows = {(e.src, e.dst) for e in EDGES if _arrow_rules(e)}
    stale = [sorted(c) for c in KNOWN_CYCLES - cycles] + sorted(KNOWN_ARROWS - arrows)
    assert not stale, f"remove these from KNOWN_CYCLES / KNOWN_ARROWS: {stale}"


def test_the_checker_sees_a_cycle_and_a_back_arrow() -> None:
    """The rules fail on what they forbid (synthetic edges, so the test itself can fail)."""
    a, b = "replay.traces.loader", "replay.traces.hf"
    cyc = _cycles([Edge(a, b, 1, False), Edge(b, a, 2, False)])
    assert len(cyc) == 1 and {e.src for e in cyc[0]} == {a, b}
    assert _arrow_rules(Edge("pricing.bills", "replay.rundir", 1, False))
    assert _arrow_rules(Edge("analysis.runs", "replay.sim.runner", 1, True))
    assert _arrow_rules(Edge("replay.sim.runner", "replay.commands.common", 1, False))
    assert _arrow_rules(Edge("dashboards.app", "replay.sim.runner", 1, False))
    assert _arrow_rules(Edge("replay.client.session", "analysis.runs", 1, False))
    assert _arrow_rules(Edge("replay.engines.launch", "replay.emulator.launch", 1, False))
    assert _arrow_rules(Edge("replay.emulator.server", "replay.engines.adapters", 1, False))
    assert _arrow_rules(Edge("replay.sim.native.worker", "replay.engines.configs", 1, False))
    assert _arrow_rules(Edge("replay.fleet.cache_aware", "replay.sim.cache.keys", 1, True))
    assert _arrow_rules(Edge("replay.fleet.base", "analysis.runs", 1, False))
    assert _arrow_rules(Edge("replay.sim.fleet", "replay.fleet.base", 1, False)) is None
    assert _arrow_rules(Edge("replay.commands.run", "analysis.runs", 1, False)) is None
    # The layers added with issue 33: the spec above the executors, traces below the workload,
    # and the simulator's cache < engine < run driver.
    assert _arrow_rules(Edge("replay.client.config", "replay.runspec.fields", 1, True))
    assert _arrow_rules(Edge("replay.emulator.cli", "replay.runspec.flags", 1, False))
    assert _arrow_rules(Edge("replay.traces.stats", "replay.workload", 1, False))
    assert _arrow_rules(Edge("replay.sim.cache.hybrid", "replay.sim.engine.core", 1, True))
    assert _arrow_rules(Edge("replay.sim.cache.policies", "replay.sim.runner", 1, False))
    assert _arrow_rules(Edge("replay.sim.engine.core", "replay.sim.executors", 1, True))
    assert _arrow_rules(Edge("replay.sim.engine.cache", "replay.sim.native.sched_oracle", 1, 0))
    assert _arrow_rules(Edge("replay.runspec.model", "replay.client.config", 1, False)) is None
    assert _arrow_rules(Edge("replay.sim.engine.cache", "replay.sim.cache.hybrid", 1, 0)) is None
    assert (
        _arrow_rules(Edge("replay.sim.cache.policies", "replay.sim.native.policies", 1, 0)) is None
    )
    assert _arrow_rules(Edge("replay.sim.native.sched_oracle", "replay.sim.runner", 1, 0)) is None
    # A circle closed by a type-only import counts.
    a, b = "replay.client.fanout", "replay.client.orchestrate"
    assert len(_cycles([Edge(a, b, 1, True), Edge(b, a, 2, False)])) == 1
