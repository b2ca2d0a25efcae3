"""Which runs are seeds of one configuration: a sweep pools runs (mean ± SE across seeds) only
when their manifests differ in the seed alone.

`config_fields(manifest)` is what a run was configured with, flattened to dotted paths: the
executor, the trace (its checksum), the resolved `config` (window, duration, sessions, timing,
policy, model, capacity, SLO, ...), each engine as the manifest names it (kind, model, GPUs,
server version, flags, replicas, its fleet's router) and the run's spec (router, replicas, host
and external tiers, profile, ...). Left out: the seed (wherever it stands), what the run
measured or did (its working-set ratio, events, notes, status, times) and where or how the
client ran rather than what it ran (URLs, the token salt, the client's workers, a Ray address,
the command line). `config_key` is that as one comparable string; `config_labels` says in a
few words how configurations differ (the router, the host GiB), for a table's row or a line.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from analysis.registry import executor_of
from replay.rundir_models import Manifest

# Keys left out wherever they stand (the module docstring): the seed, and where the run ran.
_NOT_CONFIG = frozenset({"seed", "salt", "url", "urls", "replica_urls", "router_version"})
# Top-level keys of the spec that say how the client ran, not what it ran; its trace path is
# the manifest's trace, compared by checksum.
_NOT_SPEC = frozenset({"workers", "ray"})
# An engine entry's fields that describe what ran (the rest are what preflight found).
_ENGINE_FIELDS = {
    "name",
    "kind",
    "model",
    "gpus",
    "gpu_type",
    "server_version",
    "flags",
    "engine_model",
    "block_size",
    "replicas",
    "fleet",
    "context_tokens",
    "vocab_size",
}


def _flatten(value: Any, path: str, out: dict[str, Any]) -> None:
    """Dicts (and lists holding dicts) into dotted paths; other lists stay whole; a null is
    the same as a missing key."""
    if isinstance(value, dict):
        for key, item in value.items():
            if str(key) not in _NOT_CONFIG:
                _flatten(item, f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list | tuple) and any(isinstance(v, dict) for v in value):
        for i, item in enumerate(value):
            _flatten(item, f"{path}.{i}", out)
    elif value is not None:
        out[path] = list(value) if isinstance(value, tuple) else value


def config_fields(manifest: Manifest) -> dict[str, Any]:
    """{dotted path: value} of everything the run was configured with (the module docstring)."""
    trace = manifest.trace
    spec = {k: v for k, v in (manifest.spec or {}).items() if k not in _NOT_SPEC}
    workload = spec.get("workload")
    if isinstance(workload, dict):
        spec["workload"] = {k: v for k, v in workload.items() if k != "trace"}
    raw = {
        "executor": executor_of(manifest),
        "trace": None
        if trace is None
        else {
            "sha256": trace.sha256,
            "path": None if trace.sha256 else trace.path,
            "token_scale": trace.token_scale,
        },
        "config": manifest.config.model_dump(mode="json", exclude={"working_set_ratio"}),
        "spec": spec,
        "engines": [e.model_dump(mode="json", include=_ENGINE_FIELDS) for e in manifest.engines],
    }
    out: dict[str, Any] = {}
    _flatten(raw, "", out)
    return out


def config_key(manifest: Manifest) -> str:
    """`config_fields` as one string: equal for two runs exactly when they differ in the seed
    alone (or in nothing)."""
    return json.dumps(config_fields(manifest), sort_keys=True, default=str)


def _gib(what: str) -> Callable[[Any], str]:
    return lambda v: f"{what} {0 if v is None else v:g} GiB"


def _min(seconds: float) -> str:
    """90 → "1.5": seconds as minutes, to two decimals."""
    return f"{round(seconds / 60, 2):g}"


def _window(v: Any) -> str:
    return "whole run" if v is None else f"window {_min(v[0])}–{_min(v[1])} min"


def _minutes(v: Any) -> str:
    return "length unknown" if v is None else f"{_min(v)} min run"


# A path's last key → how a label says its value (None: the run does not say).
_SAID: dict[str, Callable[[Any], str]] = {
    "router": lambda v: f"router {v or 'none'}",
    "replicas": lambda v: f"{v or 1} replicas",
    "host_memory_gb": _gib("host"),
    "external_memory_gb": _gib("store"),
    "host_kv_share": lambda v: f"host KV share {v if v is not None else 'auto'}",
    "capacity_blocks": lambda v: f"{v} blocks" if v is not None else "the profile's blocks",
    "duration_s": _minutes,
    "duration_min": lambda v: f"{v:g} min run",
    "window": _window,
    "sessions": lambda v: f"{v} sessions",
    "timing": lambda v: f"{v} timing",
    "policy": lambda v: f"policy {v}",
    "model": lambda v: f"model {v}",
    "profile": lambda v: f"profile {v}",
    "token_scale": lambda v: f"tokens ÷{v or 1:g}",
    "sha256": lambda v: f"trace {str(v)[:8]}",
    "executor": str,
    "server_version": lambda v: f"server {v}",
}
# Leaves that say what another says (in other units, or as given rather than resolved): a
# label names one of them.
_SAME = {
    "profile": "model",
    "duration_min": "duration_s",
    "replayed_duration_s": "duration_s",
    "replayed_window": "window",
    "requested_capacity_blocks": "capacity_blocks",
}
# Which paths speak first when two say the same thing (the simulator writes its options to
# the engine's flags too, and a capacity in both the config and the spec).
_FIRST = ("executor", "trace.", "config.", "spec.", "engines.")


def _rank(path: str) -> tuple[int, str]:
    return next((i for i, p in enumerate(_FIRST) if path.startswith(p)), len(_FIRST)), path


def _leaf(path: str) -> str:
    return next(p for p in reversed(path.split(".")) if not p.isdigit())


def _first_of_each(paths: Iterable[str]) -> list[str]:
    """`paths` ranked (`_FIRST`), the first only of those that say the same (`_SAME`)."""
    seen: set[str] = set()
    out = []
    for p in sorted(dict.fromkeys(paths), key=_rank):
        what = _SAME.get(_leaf(p), _leaf(p))
        if what not in seen:
            seen.add(what)
            out.append(p)
    return out


def _said(path: str, value: Any) -> str:
    leaf = _leaf(path)
    if leaf in _SAID:
        return _SAID[leaf](value)
    if isinstance(value, list):
        return f"{leaf} {','.join(map(str, value)) or 'none'}"
    return f"{leaf} {'none' if value is None else value}"


def differing_paths(configs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The paths whose values are not the same in every one of `configs`, one of those that
    say the same thing (`_first_of_each`; a simulator's `flags` only when nothing else
    differs)."""
    configs = list(configs)
    paths = sorted({p for c in configs for p in c}, key=_rank)
    varying = [p for p in paths if len({json.dumps(c.get(p), default=str) for c in configs}) > 1]
    return _first_of_each([p for p in varying if _leaf(p) != "flags"] or varying)


def config_labels(cells: Iterable[Iterable[str]]) -> dict[str, str]:
    """{config key: what sets it apart}, for every key in `cells` (the keys that share a
    table's row or a figure's point: one engine at one session count). The label names the
    fields that differ within any cell ("router state_aware", "host 20 GiB"), the same fields
    for every key, so a column reads alike down the table; "" for every key when no cell
    holds two configurations."""
    groups = [list(dict.fromkeys(c)) for c in cells]
    keys = list(dict.fromkeys(k for g in groups for k in g))
    fields = {k: json.loads(k) for k in keys}
    varying: list[str] = []
    for g in groups:
        if len(g) > 1:
            varying += differing_paths(fields[k] for k in g)
    paths = _first_of_each(varying)
    labels = {k: ", ".join(dict.fromkeys(_said(p, fields[k].get(p)) for p in paths)) for k in keys}
    # Labels must tell the configurations of a cell apart; where two read alike, number them.
    for g in groups:
        counts = Counter(labels[k] for k in g)
        for i, k in enumerate(k for k in g if counts[labels[k]] > 1):
            labels[k] = f"{labels[k]} (configuration {i + 1})".lstrip()
    return labels


__all__ = ["config_fields", "config_key", "config_labels", "differing_paths"]
