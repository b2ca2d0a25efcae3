"""Where the project's YAML data lives (`configs/`), overridable with REPLAY_CONFIG_DIR, and how
one of its files is read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

_REPO_CONFIGS = Path(__file__).resolve().parents[1] / "configs"
# The real corpus in the shared folder beside a checkout (../shared/traces/, not part of the
# project): the tests, the benchmarks and the experiments that replay it look for it here.
REAL_CORPUS = _REPO_CONFIGS.parents[1] / "shared" / "traces" / "kvct-dev.jsonl.gz"


class ConfigDirError(ValueError):
    """REPLAY_CONFIG_DIR names something that is not a folder; the message says so."""


def config_dir_problem() -> str | None:
    """Why $REPLAY_CONFIG_DIR cannot be the `configs/` folder (None: unset, or a folder, or
    nothing yet, which each loader names with the file it looked for). A file there used to
    be blamed on the first flag that read it (`--model: model profile 'glm-5.3-flash' not
    found`)."""
    env = os.environ.get("REPLAY_CONFIG_DIR")
    if not env or not Path(env).exists() or Path(env).is_dir():
        return None
    return (
        f"REPLAY_CONFIG_DIR is {env}, which is not a folder; it must be a folder like the "
        "project's configs/ (engines/, models/, workloads/, pricing/): point it at one, or "
        "unset it for the bundled configs"
    )


def config_dir() -> Path:
    """The `configs/` folder: $REPLAY_CONFIG_DIR if set, else the one beside the package.
    ConfigDirError where the variable names a file (`config_dir_problem`): the command line
    refuses it before any command runs (`replay.cli`)."""
    if (problem := config_dir_problem()) is not None:
        raise ConfigDirError(problem)
    env = os.environ.get("REPLAY_CONFIG_DIR")
    return Path(env) if env else _REPO_CONFIGS


def project_root() -> Path:
    """The folder holding `configs/` (relative interpreter paths start here)."""
    return config_dir().resolve().parent


def config_subdir(kind: str) -> Path:
    """`configs/<kind>/` (engines, models, workloads, pricing)."""
    return config_dir() / kind


def subdir_blame(kind: str) -> str:
    """Where `configs/<kind>/` is REPLAY_CONFIG_DIR's and it is missing or holds no YAML,
    the words that say so ('' otherwise): a profile not found under a variable pointing at
    nothing was blamed on the flag that named it (`--model`, which `replay run` lacks)."""
    env = os.environ.get("REPLAY_CONFIG_DIR")
    if not env:
        return ""
    sub = Path(env) / kind
    if sub.is_dir() and any(sub.glob("*.yaml")):
        return ""
    what = "holds no NAME.yaml" if sub.is_dir() else "does not exist"
    return (
        f"; REPLAY_CONFIG_DIR is {env}, whose {kind} folder {sub} {what}: point it at a folder "
        "like the project's configs/, or unset it for the bundled configs"
    )


def shipped_config_subdir(kind: str) -> Path:
    """`configs/<kind>/` as shipped beside the package (whatever REPLAY_CONFIG_DIR says)."""
    return _REPO_CONFIGS / kind


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping: PyYAML keeps the last
    silently (`sessions: 2` then `sessions: 3` ran 3 sessions). Keys merged in from an anchor
    (`<<: *base`) may still be overridden, as YAML means them to be."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                again = key in first
            except TypeError:  # an unhashable key: the safe loader names it
                continue
            if again:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} given twice (first on line {first[key] + 1}); keep one",
                    key_node.start_mark,
                )
            first[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """YAML text as data, by the safe loader, a key given twice in a mapping refused (a
    `yaml.MarkedYAMLError` naming its line, as any other YAML error): model profiles, the
    embedded default, run and engine configs, and the reference figures are read through
    here (the pricing sheets, in their own package, keep PyYAML's loader)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader


def read_yaml_mapping(path: Path, error: type[Exception], what: str) -> dict[str, Any]:
    """A YAML file's top-level mapping (empty for an empty file); `error` naming the file when
    it is not valid YAML or not a mapping (`what`: "settings", "profile fields")."""
    try:
        data = load_yaml(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise error(f"{path}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise error(f"{path}: expected a mapping of {what}")
    return data
