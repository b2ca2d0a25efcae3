"""One way to name what a pydantic model refused: `field 'a.b': message` of its first error,
for the config and profile loaders' messages (the run directory's reader says more)."""

from __future__ import annotations

from pydantic import ValidationError


def first_field_error(e: ValidationError) -> str:
    """`field 'engines.0.port': Input should be a valid integer` for the first error."""
    err = e.errors()[0]
    loc = ".".join(str(x) for x in err["loc"])
    return f"field '{loc}': {str(err['msg']).removeprefix('Value error, ')}"


__all__ = ["first_field_error"]
