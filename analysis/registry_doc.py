"""docs/metrics.md's table of every metric, generated from the registry.

`python -m analysis.registry_doc` rewrites the table between the page's markers;
tests/unit/analysis/test_analysis_registry.py fails when the page and the registry disagree.
"""

from __future__ import annotations

from pathlib import Path

from analysis.registry import METRICS, header

DOC_PAGE = Path(__file__).parents[1] / "docs" / "metrics.md"
BEGIN = "<!-- metric-registry:begin (python -m analysis.registry_doc) -->"
END = "<!-- metric-registry:end -->"


def catalog_markdown() -> str:
    """The registry as the table docs/metrics.md shows (between its markers)."""
    rows = [
        "| key | label | format | better | cannot know it | shown in |",
        "|---|---|---|---|---|---|",
    ]
    for m in METRICS:
        fmt = m.fmt + (f" ({m.digits})" if m.fmt in ("num", "pct", "usd", "ratio") else "")
        store = ("" if m.summary else "not stored; ") + (
            f"only when {m.only_when}; " if m.only_when else ""
        )
        se = " ± SE" if m.se else ""
        cannot = ", ".join(m.unknown) or "–"
        views = ", ".join(sorted(m.views)) or "–"
        rows.append(
            f"| `{m.key}`{se} | {header(m)} | {fmt} | {m.better or '–'} | {cannot} | "
            f"{store}{views} |"
        )
    return "\n".join(rows) + "\n"


def catalog_section(text: str) -> str | None:
    """What stands between docs/metrics.md's markers, or None without them."""
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def write_catalog(page: Path = DOC_PAGE) -> None:
    text = page.read_text(encoding="utf-8")
    if catalog_section(text) is None:
        raise SystemExit(f"{page}: no {BEGIN} ... {END} markers")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    page.write_text(f"{head}{BEGIN}\n{catalog_markdown()}{END}{tail}", encoding="utf-8")


__all__ = ["BEGIN", "DOC_PAGE", "END", "catalog_markdown", "catalog_section", "write_catalog"]


if __name__ == "__main__":
    write_catalog()
    print(f"wrote the registry's table into {DOC_PAGE}")
