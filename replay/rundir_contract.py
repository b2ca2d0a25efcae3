"""The run-directory contract checked: the field tables of docs/run-directory.md, generated from
the models, and the strict check of every manifest.json / summary.json under a folder.

`python -m replay.rundir_contract` rewrites the tables between docs/run-directory.md's
`<!-- rundir-contract:begin -->` and `<!-- rundir-contract:end -->` markers;
tests/unit/replay/test_rundir_models.py fails when that page and the models disagree.
`written_problems(root)` is what tests/conftest.py runs after every test on its tmp_path.
"""

from __future__ import annotations

import os
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ValidationError

from replay.rundir_models import Manifest, RunSummary

_FILES: dict[str, type[BaseModel]] = {"manifest.json": Manifest, "summary.json": RunSummary}


def written_problems(root: Path) -> list[str]:
    """Every manifest.json / summary.json under `root` that does not validate under the
    *write* rule (unknown keys forbidden), each as "path: what is wrong"."""
    out = []
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in sorted(_FILES.keys() & set(files)):
            path = Path(here) / name
            try:
                _FILES[name].model_validate(orjson.loads(path.read_bytes()))
            except (orjson.JSONDecodeError, ValidationError) as e:
                out.append(f"{path}: {e}")
    return out


CONTRACT_PAGE = Path(__file__).parents[1] / "docs" / "run-directory.md"
BEGIN = "<!-- rundir-contract:begin (python -m replay.rundir_contract) -->"
END = "<!-- rundir-contract:end -->"


def _type_text(annotation: Any) -> str:
    """A short, stable name of a field's type for the contract table."""
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_text(a) for a in args)
    if origin is Literal:
        return " \\| ".join(str(a) for a in typing.get_args(annotation))
    if origin is list:
        return f"list of {_type_text(args[0])}"
    if origin is tuple:
        return "[" + ", ".join(_type_text(a) for a in args) + "]"
    if origin is dict:
        return f"{{{_type_text(args[0])}: {_type_text(args[1])}}}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation)).replace("NoneType", "null")


def _nested(annotation: Any) -> type[BaseModel] | None:
    for a in (annotation, *typing.get_args(annotation)):
        if isinstance(a, type) and issubclass(a, BaseModel):
            return a
        for b in typing.get_args(a):
            if isinstance(b, type) and issubclass(b, BaseModel):
                return b
    return None


def contract_rows(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted field, type, meaning) for every field of `model`, nested records expanded
    (`engines[].name`, `config.window`, `replay_fidelity.<engine>.drift`)."""
    rows = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        rows.append((path, _type_text(info.annotation), info.description or ""))
        sub = _nested(info.annotation)
        if sub is not None:
            origin = typing.get_origin(info.annotation)
            inner = [typing.get_origin(a) for a in typing.get_args(info.annotation)]
            if origin is list or list in inner:
                path += "[]"
            elif origin is dict or dict in inner:
                path += ".<engine>"
            rows += contract_rows(sub, path + ".")
    return rows


def contract_markdown() -> str:
    """The field tables of manifest.json and summary.json (`python -m replay.rundir_contract`
    writes them into docs/run-directory.md; a unit test checks the page agrees)."""
    out = []
    for title, model in (("manifest.json", Manifest), ("summary.json", RunSummary)):
        out += [f"`{title}` (schema_version {model.model_fields['schema_version'].default}):", ""]
        out += ["| field | type | meaning |", "|---|---|---|"]
        out += [
            f"| `{p}` | {t} | {d.replace('|', chr(92) + '|')} |" for p, t, d in contract_rows(model)
        ]
        out.append("")
    out.append(
        "Every field may be absent (null); readers take the default the meaning names. "
        "`summary.json`'s `engines.<engine>` also holds every metric of `analysis.metrics` "
        "and `analysis.verdicts`, each with its `<metric>_se` (time-bin standard error), "
        "and the default sheet's prices; NaN is null."
    )
    return "\n".join(out) + "\n"


def contract_section(text: str) -> str | None:
    """The generated part of a page's text (None when it has no markers)."""
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def rewrite(page: Path) -> bool:
    """Put the current tables between the markers; True when the file changed."""
    text = page.read_text()
    if contract_section(text) is None:
        raise SystemExit(f"{page}: no {BEGIN} ... {END} markers; add them where the tables go")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    new = f"{head}{BEGIN}\n{contract_markdown()}{END}{tail}"
    if new != text:
        page.write_text(new)
    return new != text


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else CONTRACT_PAGE
    print(f"{path}: {'rewritten' if rewrite(path) else 'already up to date'}")
