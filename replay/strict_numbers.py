"""Numbers a user writes in a file are numbers, never a YAML true/false.

Pydantic's lax mode reads a bool as a number: `seed: true` in a run config ran seed 1, and
`duration_min: yes` a one-minute run. The fields a user's file, a flag or a stored spec fills
(the run spec, a run config's engines, the embedded default, engine configs, model profiles,
the emulator's config) are typed `Whole` (a whole number) or `Number` (any number), optional
as `Whole | None`: one check, named by its field as any other refused value. Everything else
about the value (`'3'` from a form, `4.0` for a count) is pydantic's as before.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator


def bool_problem(kind: str) -> str:
    """The refusal of a true/false where `kind` (`a whole number`) is wanted (YAML reads
    true, yes and on as one)."""
    return f"must be {kind}, not a yes/no value"


def refuse_bool(value: Any, kind: str) -> Any:
    """`value` as given; ValueError where it is a true/false (a validator's check, for a
    field that cannot take `Whole` or `Number`)."""
    if isinstance(value, bool):
        raise ValueError(bool_problem(kind))
    return value


def _not_a_bool(kind: str) -> BeforeValidator:
    return BeforeValidator(lambda value: refuse_bool(value, kind))


Whole = Annotated[int, _not_a_bool("a whole number")]
Number = Annotated[float, _not_a_bool("a number")]

__all__ = ["Number", "Whole", "bool_problem", "refuse_bool"]
