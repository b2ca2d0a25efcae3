"""Reading the project's YAML: a key given twice is refused naming its line (PyYAML keeps
the last value silently), while keys merged from an anchor may still be overridden."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from replay.config_paths import load_yaml, read_yaml_mapping
from replay.profiles import ProfileError


def test_a_key_given_twice_is_refused_naming_both_lines() -> None:
    with pytest.raises(yaml.MarkedYAMLError) as e:
        load_yaml("engines:\n  - name: a\n    gpus: 1\n    gpus: 2\n")
    text = str(e.value)
    assert "key 'gpus' given twice (first on line 3); keep one" in text
    assert "line 4, column 5" in text


def test_flow_mappings_and_nested_mappings_are_checked_too() -> None:
    with pytest.raises(yaml.MarkedYAMLError, match="key 'a' given twice"):
        load_yaml("{a: 1, a: 2}")
    with pytest.raises(yaml.MarkedYAMLError, match="key 'x' given twice"):
        load_yaml("outer:\n  inner:\n    x: 1\n    x: 2\n")


def test_a_merged_key_may_be_overridden_and_plain_yaml_loads_as_before() -> None:
    text = "base: &b\n  sessions: 2\n  seed: 1\nrun:\n  <<: *b\n  sessions: 3\n"
    assert load_yaml(text) == {
        "base": {"sessions": 2, "seed": 1},
        "run": {"sessions": 3, "seed": 1},
    }
    assert load_yaml("") is None
    assert load_yaml("- 1\n- 2\n") == [1, 2]


def test_a_profile_file_with_a_key_twice_names_the_file(tmp_path: Path) -> None:
    p = tmp_path / "m.yaml"
    p.write_text("context_tokens: 10\ncontext_tokens: 20\n")
    with pytest.raises(ProfileError) as e:
        read_yaml_mapping(p, ProfileError, "profile fields")
    assert str(p) in str(e.value) and "key 'context_tokens' given twice" in str(e.value)


def test_python_tags_stay_refused() -> None:
    with pytest.raises(yaml.YAMLError):
        load_yaml("!!python/object/apply:os.system ['true']\n")
