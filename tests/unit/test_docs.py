"""The README stays a guide and the docs stay wired to it and to the command line.

- The README is at most 400 lines (issue 25: the contract tables, the research and the
  benchmarks live in docs/, one subject per page).
- Every relative link in the README and in docs/*.md resolves to a file, and a link to a
  heading of a page (`page.md#anchor`) to a heading of that page.
- Every docs/*.md is linked from the README or from docs/index.md.
- Every `replay ...` command in a code block of the README or a docs page names a real
  command, and every `--flag` it uses is a flag of that command.
- docs/cli.md lists, under each command's heading, exactly the flags that command has.
- experiments/README.md, the experiments' index, has one row per script of experiments/ (no
  row for a script that is not there), its links resolve, and docs/index.md links it.

Nothing is imported but the command line's typer app; the pages are read as text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from replay.cli import app

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
INDEX = DOCS / "index.md"
EXPERIMENTS = ROOT / "experiments"
EXPERIMENTS_INDEX = EXPERIMENTS / "README.md"
MAX_README_LINES = 400

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def links(page: Path) -> Iterator[tuple[str, Path, str]]:
    """(link text as written, target file, anchor) for every relative link of a page."""
    text = FENCE.sub("", page.read_text())
    for m in LINK.finditer(text):
        href = m.group(1)
        if re.match(r"^[a-z]+:", href) or href.startswith("#"):
            continue
        path, _, anchor = href.partition("#")
        yield href, (page.parent / path).resolve(), anchor


def test_the_readme_is_a_guide_of_at_most_400_lines() -> None:
    n = len(README.read_text().splitlines())
    assert n <= MAX_README_LINES, (
        f"README.md has {n} lines (at most {MAX_README_LINES}): move the detail to a docs/ page "
        "and link it (docs/index.md lists them)"
    )


@pytest.mark.parametrize(
    "page", [README, EXPERIMENTS_INDEX, *pages()], ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_every_link_resolves(page: Path) -> None:
    broken = []
    for href, target, anchor in links(page):
        if not target.exists():
            broken.append(f"{href}: no file {target.relative_to(ROOT)}")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{href}: no heading '#{anchor}' in {target.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(broken)


def test_the_quick_start_is_the_two_commands() -> None:
    """The README's quick start is exactly `bash scripts/quickstart.sh` and `bash scripts/test.sh`
    (a fresh clone runs them), and both scripts are there."""
    section = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    first = FENCE.search(section)
    assert first is not None, "README.md's quick start has no code block"
    commands = [line.strip() for line in first.group(1).splitlines() if line.strip()]
    assert commands == ["bash scripts/quickstart.sh", "bash scripts/test.sh"]
    for script in ("scripts/quickstart.sh", "scripts/test.sh", ".ci/run"):
        assert (ROOT / script).is_file(), f"{script} is gone"
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_every_docs_page_is_linked_from_the_readme_or_the_index() -> None:
    linked = {t for p in (README, INDEX) for _, t, _ in links(p)}
    orphans = [p.name for p in pages() if p.resolve() not in linked]
    assert not orphans, (
        f"docs pages nobody links: {orphans}; add each to docs/index.md (or the README's "
        "'Where to read more')"
    )


def test_the_experiments_index_has_a_row_for_each_experiment() -> None:
    """Each row of experiments/README.md's table names a script of experiments/ in its first
    cell; every script there has a row, and the docs' index links the page."""
    rows = re.findall(r"^\| `([\w.]+\.py)` \|", EXPERIMENTS_INDEX.read_text(), re.M)
    scripts = sorted(p.name for p in EXPERIMENTS.glob("*.py"))
    assert sorted(rows) == scripts, (
        f"experiments/README.md rows {sorted(rows)} against the scripts there {scripts}: give "
        "each experiment one row (its question, its finding, the doc that cites it)"
    )
    assert EXPERIMENTS_INDEX.resolve() in {t for _, t, _ in links(INDEX)}, (
        "docs/index.md must link experiments/README.md"
    )


def test_the_readme_links_the_index_and_only_existing_pages() -> None:
    targets = {t for _, t, _ in links(README)}
    assert INDEX.resolve() in targets, "README.md must link docs/index.md"


# --- commands in code blocks -------------------------------------------------------------


def command_tree() -> Any:
    return typer.main.get_command(app)


def flags_of(cmd: Any) -> set[str]:
    out = {"--help"}
    for p in cmd.params:
        if p.param_type_name == "option":
            out.update(p.opts)
            out.update(p.secondary_opts)
    return out


def leaf_commands(cmd: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    cmd = command_tree() if cmd is None else cmd
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from leaf_commands(sub, (*path, name))
    else:
        yield " ".join(path), cmd


def command_lines(text: str) -> Iterator[str]:
    """Each shell command of the page's code blocks that calls `replay`, continuations joined,
    comments dropped."""
    for block in FENCE.findall(text):
        # a backslash continues a line; so does an indented `[--flag` or `--flag` (a synopsis)
        joined = re.sub(r"\\\n\s*", " ", block)
        joined = re.sub(r"\n\s+(?=\[?--)", " ", joined)
        for line in joined.splitlines():
            line = re.sub(r"\s#.*$", "", line).strip()
            if line.startswith("#"):
                continue
            for part in re.split(r"&&|\|\||;|\s&(?:\s|$)|\s\|\s", line):
                words = re.sub(r"^\S*python\S* -m replay\b", "replay", part.strip()).split()
                if words and (words[0] == "replay" or words[0].endswith("/replay")):
                    yield " ".join(words)


def check_command(line: str) -> str | None:
    """None when the line's command exists and takes every flag it uses; else what is wrong."""
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    words = [w.strip("[]") for w in words[1:]]
    cmd = command_tree()
    path: list[str] = []
    while hasattr(cmd, "commands"):
        if not words or words[0] not in cmd.commands:
            if words and re.fullmatch(r"[a-z\-]+(\|[a-z\-]+)+", words[0]):  # a synopsis: a|b|c
                return None
            return f"`{line}`: no command `replay {' '.join([*path, *words[:1]])}`"
        path.append(words[0])
        cmd = cmd.commands[words.pop(0)]
    known = flags_of(cmd)
    unknown = [
        w.split("=", 1)[0]
        for w in words
        if w.startswith("--") and w.split("=", 1)[0] not in known and w != "--"
    ]
    if unknown:
        return f"`{line}`: `replay {' '.join(path)}` has no flag {', '.join(unknown)}"
    return None


@pytest.mark.parametrize("page", [README, *pages()], ids=lambda p: p.name)
def test_every_replay_command_in_a_code_block_exists_with_its_flags(page: Path) -> None:
    problems = [p for line in command_lines(page.read_text()) if (p := check_command(line))]
    assert not problems, f"{page.relative_to(ROOT)}:\n" + "\n".join(problems)


def test_the_readme_tour_calls_every_command() -> None:
    called = {check_line.split()[1] for check_line in command_lines(README.read_text())}
    top = set(command_tree().commands)
    assert top <= called, f"the README's tour has no example of: {sorted(top - called)}"


def cli_page_flags() -> dict[str, set[str]]:
    """The flags docs/cli.md lists in the table under each `### \\`replay NAME\\`` heading."""
    out: dict[str, set[str]] = {}
    current = None
    for line in (DOCS / "cli.md").read_text().splitlines():
        m = re.match(r"^### `replay ([a-z\- ]+)`", line)
        if m:
            current = m.group(1)
            out[current] = set()
        elif current and line.startswith("| `--"):
            out[current].update(re.findall(r"`(--[a-z0-9\-]+)`", line.split("|")[1]))
    return out


def test_docs_cli_lists_every_command_and_exactly_its_flags() -> None:
    listed = cli_page_flags()
    problems = []
    for name, cmd in leaf_commands():
        if name not in listed:
            problems.append(f"no section `### \\`replay {name}\\``")
            continue
        real = flags_of(cmd) - {"--help"}
        if missing := sorted(real - listed[name]):
            problems.append(f"replay {name}: flags not listed: {missing}")
        if extra := sorted(listed[name] - real):
            problems.append(f"replay {name}: listed flags it does not have: {extra}")
    for name in sorted(set(listed) - {n for n, _ in leaf_commands()}):
        problems.append(f"a section for `replay {name}`, which is no command")
    assert not problems, "docs/cli.md disagrees with the command line:\n" + "\n".join(problems)
