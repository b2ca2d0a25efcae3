from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from replay.field_errors import first_field_error


class _Inner(BaseModel):
    port: int


class _Outer(BaseModel):
    engines: list[_Inner]


def test_names_the_nested_field_of_the_first_error() -> None:
    with pytest.raises(ValidationError) as info:
        _Outer.model_validate({"engines": [{"port": "x"}, {"port": "y"}]})
    assert first_field_error(info.value) == (
        "field 'engines.0.port': Input should be a valid integer, unable to parse string as an "
        "integer"
    )
