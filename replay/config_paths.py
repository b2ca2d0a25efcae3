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


def config_dir() -> Path:
    """The `configs/` folder: $REPLAY_CONFIG_DIR if set, else the one beside the package."""
    env = os.environ.get("REPLAY_CONFIG_DIR")
    return Path(env) if env else _REPO_CONFIGS


def project_root() -> Path:
    """The folder holding `configs/` (relative interpreter paths start here)."""
    return config_dir().resolve().parent


def config_subdir(kind: str) -> Path:
    """`configs/<kind>/` (engines, models, workloads, pricing)."""
    return config_dir() / kind


def shipped_config_subdir(kind: str) -> Path:
    """`configs/<kind>/` as shipped beside the package (whatever REPLAY_CONFIG_DIR says)."""
    return _REPO_CONFIGS / kind


def read_yaml_mapping(path: Path, error: type[Exception], what: str) -> dict[str, Any]:
    """A YAML file's top-level mapping (empty for an empty file); `error` naming the file when
    it is not valid YAML or not a mapping (`what`: "settings", "profile fields")."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise error(f"{path}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise error(f"{path}: expected a mapping of {what}")
    return data
