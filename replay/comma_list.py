"""A flag's comma list (`--policies vllm,sglang`, `--engines`, `--router`, `--sessions 16,32`):
its items, an empty one refused naming the flag.

One check for every comma-list flag: `--policies vllm,,sglang` and `--engines vllm,` used to
drop the empty item in silence while `--sessions 2,,4` was refused, so a typo could run a
sweep of fewer points than written. A list that is blank as a whole is its command's own
refusal (`--engines ''`: names no engine), so it comes back empty.
"""

from __future__ import annotations


class CommaListError(ValueError):
    """A comma list with an empty item; the message names the flag and what to write."""


def comma_items(text: str, flag: str, example: str) -> list[str]:
    """The stripped items of `text`, in order; [] when it holds nothing but commas and
    spaces. CommaListError naming `flag` (with `example`, e.g. `vllm,flashstate`) where one
    item is empty among others (`a,,b`, `a,`, `,a`)."""
    items = [part.strip() for part in text.split(",")]
    if not any(items):
        return []
    if "" in items:
        where = items.index("") + 1
        raise CommaListError(
            f"{flag} {text!r}: item {where} of {len(items)} is empty; separate the items "
            f"with single commas, e.g. {flag} {example}"
        )
    return items


__all__ = ["CommaListError", "comma_items"]
