"""Published reference figures of real corpora (`replay/data/reference-<name>.yaml`).

`load_reference(name)` reads one; `compare(figures, ref)` puts a trace's figures
(`replay.traces.figures.corpus_figures`) beside it with ratios. A name that is not bundled
is an error listing the known ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from replay.config_paths import load_yaml

PREFIX, SUFFIX = "reference-", ".yaml"


class ReferenceError(ValueError):
    """An unknown reference name or a malformed reference file; the message says which."""


@dataclass(frozen=True, slots=True)
class Figure:
    key: str
    value: float
    unit: str
    label: str
    source: str
    definition: str
    check: bool


@dataclass(frozen=True, slots=True)
class Reference:
    name: str
    path: Path
    tolerance: float
    figures: tuple[Figure, ...]
    sources: dict[str, str]


def _data_dir() -> Path:
    return Path(str(resources.files("replay") / "data"))


def known_references() -> list[str]:
    """The bundled reference names, sorted."""
    return sorted(
        p.name[len(PREFIX) : -len(SUFFIX)] for p in _data_dir().glob(f"{PREFIX}*{SUFFIX}")
    )


def load_reference(name: str) -> Reference:
    path = _data_dir() / f"{PREFIX}{name}{SUFFIX}"
    if not path.is_file():
        known = ", ".join(known_references()) or "(none bundled)"
        raise ReferenceError(f"unknown reference corpus {name!r}; known: {known}")
    return parse_reference(path, name)


def parse_reference(path: Path, name: str) -> Reference:
    try:
        doc = load_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise ReferenceError(f"{path}: not valid YAML ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("figures"), dict):
        raise ReferenceError(f"{path}: expected a mapping with a 'figures' mapping")
    sources = doc.get("sources") or {}
    if not isinstance(sources, dict):
        raise ReferenceError(f"{path}: field 'sources': expected a mapping")
    tol = doc.get("tolerance", 0.15)
    if not isinstance(tol, int | float) or not 0 < tol < 1:
        raise ReferenceError(f"{path}: field 'tolerance': expected a share in (0, 1), got {tol!r}")
    figures = tuple(_figure(path, k, v, sources) for k, v in doc["figures"].items())
    return Reference(name, path, float(tol), figures, {str(k): str(v) for k, v in sources.items()})


def _figure(path: Path, key: str, v: Any, sources: dict[str, Any]) -> Figure:
    where = f"{path}: figure '{key}'"
    if not isinstance(v, dict):
        raise ReferenceError(f"{where}: expected a mapping with value, source and definition")
    value = v.get("value")
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ReferenceError(f"{where}: field 'value': expected a number, got {value!r}")
    for field in ("source", "definition"):
        if not isinstance(v.get(field), str) or not v[field]:
            raise ReferenceError(f"{where}: field '{field}': missing (every figure has one)")
    if v["source"] not in sources:
        raise ReferenceError(
            f"{where}: field 'source': {v['source']!r} is not one of the file's sources "
            f"({', '.join(sources)})"
        )
    return Figure(
        key,
        float(value),
        str(v.get("unit", "")),
        str(v.get("label", key)),
        v["source"],
        v["definition"],
        bool(v.get("check", False)),
    )


def compare(figures: dict[str, float], ref: Reference) -> list[dict[str, Any]]:
    """One row per reference figure: the trace's value, the reference's, their ratio and
    whether it is inside the reference's tolerance."""
    rows = []
    for fig in ref.figures:
        ours = figures.get(fig.key)
        if ours is None:
            raise ReferenceError(f"{ref.path}: figure '{fig.key}' is not one replay computes")
        ratio = ours / fig.value if fig.value and ours == ours else float("nan")
        rows.append(
            {
                "figure": fig.key,
                "label": fig.label,
                "unit": fig.unit,
                "trace": ours,
                "reference": fig.value,
                "ratio": ratio,
                "within_tolerance": bool(abs(ratio - 1) <= ref.tolerance),
                "source": fig.source,
            }
        )
    return rows
