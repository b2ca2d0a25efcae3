"""Where the project's YAML data lives (`configs/`), overridable with REPLAY_CONFIG_DIR."""

from __future__ import annotations

import os
from pathlib import Path

_REPO_CONFIGS = Path(__file__).resolve().parents[1] / "configs"


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
