"""What a live run is told: the engines (name, kind, URL, model, GPUs) and the replay settings.

Engines come from `--engines` + `--endpoint NAME=URL` flags or from a YAML file (`--config`):

```yaml
engines:
  - name: flashstate
    kind: flashstate          # adapter: vllm | flashstate | sglang | openai
    url: http://10.0.0.5:8000
    model: glm-5.3-flash      # optional: the first model the server lists
    gpus: 2
    gpu_type: B200
  - {name: vllm, kind: vllm, url: "http://10.0.0.6:8000", gpus: 2, gpu_type: B200}
# optional replay settings (flags override them):
sessions: 48
duration_min: 45
window: 15-45
slo: {ttft_s: 6, itl_s: 0.175, task_slowdown: 2}   # or "ttft=6,itl=0.175,slowdown=2"
```
API keys are never in the file: `api_key_env` names an environment variable. A URL's
credentials may be an environment reference, `url: http://${REPLAY_AUTH_VLLM}@host:8000`
(what `replay engines run-config` writes), expanded when the file is read.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from replay.address import url_problem
from replay.comma_list import CommaListError, comma_items
from replay.config_paths import load_yaml
from replay.engines.adapters import adapter_kinds
from replay.field_errors import first_field_error
from replay.redact import UrlEnvError, expand_url_env, redact_url, redact_urls_in
from replay.strict_numbers import Whole
from replay.userpaths import PathProblem, read_text_file

# An engine name that is also a kind needs no `kind` (vllm, sglang, flashstate).
KIND_BY_NAME = {"vllm": "vllm", "flashstate": "flashstate", "sglang": "sglang", "openai": "openai"}


class ConfigError(ValueError):
    """A bad engine list or run config; the message names the flag or file and field."""


def engine_name_problem(name: str) -> str | None:
    """Why `name` cannot name an engine (None: it can): an empty name or one holding a
    control character (a newline, a tab, an escape) breaks the tables, reports and run
    directories it names (issue 36: `''` and `'a\\nb'` were accepted)."""
    if not name.strip():
        return "an engine name must not be empty (it names the engine in records and reports)"
    bad = next((c for c in name if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")), None)
    if bad is not None:
        return (
            f"engine name {name!r} holds the control character {bad!r}, which breaks tables "
            "and records; use letters, digits, '-', '_' or '.'"
        )
    return None


def _engine_name(name: str) -> str:
    if (problem := engine_name_problem(name)) is not None:
        raise ValueError(problem)
    return name


class EngineSpec(BaseModel):
    """One engine under test."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, AfterValidator(_engine_name)] = Field(
        description="engine name in records and reports"
    )
    kind: str = Field(
        default="vllm", description="adapter kind: vllm, flashstate, sglang or openai"
    )
    url: str | None = Field(default=None, description="base URL; none: an emulator is started")
    urls: list[str] | None = Field(
        default=None,
        description="the engine's replica URLs when it has several (`url` is the first): the "
        "client routes between them (replay.client.fleet)",
    )
    model: str | None = Field(default=None, description="served model; none: the first one listed")
    gpus: Whole = Field(default=1, gt=0, description="GPUs this engine uses (per-GPU metrics)")
    gpu_type: str = Field(default="", description="GPU model, matches a rate in configs/pricing")
    vocab_size: Whole = Field(
        default=32000, gt=0, description="ids are drawn below this (minus reserved)"
    )
    context_tokens: Whole | None = Field(
        default=None, gt=0, description="the engine's context length; default: what it reports"
    )
    api: Literal["completions", "chat"] = Field(
        default="completions", description="openai kind only: completions or chat"
    )
    api_key_env: str | None = Field(default=None, description="env variable holding the API key")

    def adapter_options(self) -> dict[str, Any]:
        if self.kind != "openai":
            return {}
        opts: dict[str, Any] = {"api": self.api}
        if self.api_key_env:
            opts["api_key_env"] = self.api_key_env
        return opts

    def public(self) -> dict[str, Any]:
        """For the manifest: everything but secrets (there are none in the spec itself)."""
        return self.model_dump()


class FileConfig(BaseModel):
    """A run config file: its engines and SLO, and any of the workload's settings by the run
    spec's field names (`replay.runspec.fields.WorkloadSpec`: sessions, duration_min, window, …;
    the spec names them to `load_config_file`), which the spec checks and names as
    `--config FILE: field 'NAME'`."""

    model_config = ConfigDict(extra="allow")

    engines: list[EngineSpec]
    slo: str | dict[str, Any] | None = Field(  # values checked by analysis.slo (names the key)
        default=None,
        description="SLO thresholds: 'ttft=6,itl=0.175,slowdown=2' or "
        "{ttft_s, e2e_s, itl_s, task_slowdown}; --slo overrides",
    )

    def workload(self) -> dict[str, Any]:
        """The workload settings the file names (the spec's config-file layer)."""
        return dict(self.model_extra or {})


_LOOPBACK = ("localhost", "127.0.0.1", "::1")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def replica_key(url: str) -> str:
    """What makes two spellings of a URL one server: scheme, host and port (the scheme's
    default when none; `localhost`, `127.0.0.1` and `::1` are one loopback) and the path
    without its trailing slash, case-insensitive in the scheme and host."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").lower()
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:  # a bad port or bracket: the adapter names it when it connects
        return url.strip().rstrip("/")
    if host in _LOOPBACK:
        host = "loopback"
    return f"{parts.scheme.lower()}://{host}:{port}{parts.path.rstrip('/')}"


def refuse_repeated_replicas(urls: list[str], where: str) -> None:
    """ConfigError naming both spellings when two of an engine's replica URLs are one server
    (issue 36: the same URL with a trailing slash, or as localhost and 127.0.0.1, became two
    replicas and halved every per-GPU figure)."""
    seen: dict[str, str] = {}
    for u in urls:
        key = replica_key(u)
        if key in seen:
            first = redact_url(seen[key])
            again = redact_url(u)
            same = "given twice" if first == again else f"and {again} are one server"
            raise ConfigError(
                f"{where}: replica {first} {same} (the same host, port and path); list each "
                "replica once"
            )
        seen[key] = u


def _check_kind(spec: EngineSpec, where: str) -> None:
    if spec.kind not in adapter_kinds():
        raise ConfigError(
            f"{where}: engine '{spec.name}' has unknown kind '{spec.kind}' "
            f"(known: {', '.join(adapter_kinds())})"
        )


def load_config_file(path: Path, settings: Collection[str] | None = None) -> FileConfig:
    """The file's engines and settings; `settings`: the names of the run's settings it may
    give besides its engines and SLO (the run spec's workload fields, which
    `replay.runspec.live` passes; another key is refused naming the file and field; None:
    every other key is kept for the spec to check)."""
    try:
        data = load_yaml(read_text_file(Path(path), "--config"))
    except PathProblem as e:
        raise ConfigError(str(e)) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = getattr(e, "problem", None) or e
        raise ConfigError(f"--config {path}: not valid YAML{where} ({what})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: expected a mapping with an 'engines' list")
    for i, eng in enumerate(data.get("engines") or []):
        if isinstance(eng, dict) and "kind" not in eng and eng.get("name") in KIND_BY_NAME:
            eng["kind"] = KIND_BY_NAME[eng["name"]]
        if isinstance(eng, dict) and "name" not in eng:
            raise ConfigError(f"--config {path}: engines[{i}]: field 'name' is required")
    known = [*FileConfig.model_fields, *(settings or ())]
    unknown = sorted(set(data) - set(known))
    if settings is not None and unknown:
        raise ConfigError(
            f"--config {path}: field '{unknown[0]}': not a setting (known: {', '.join(known)})"
        )
    try:
        cfg = FileConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"--config {path}: {first_field_error(e)}") from None
    if not cfg.engines:
        raise ConfigError(f"--config {path}: field 'engines': list at least one engine")
    names = [e.name for e in cfg.engines]
    if len(set(names)) != len(names):
        raise ConfigError(f"--config {path}: field 'engines': duplicate engine names {names}")
    for i, spec in enumerate(cfg.engines):
        _check_kind(spec, f"--config {path}")
        if spec.urls is not None:
            if not spec.urls or (spec.url and spec.url != spec.urls[0]):
                raise ConfigError(
                    f"--config {path}: engines[{i}]: field 'urls' lists the replicas (url, if "
                    "given, must be the first of them); give at least one"
                )
            refuse_repeated_replicas(spec.urls, f"--config {path}: engines[{i}]: field 'urls'")
            spec.url = spec.urls[0]
        for j, u in enumerate(spec.urls or ([spec.url] if spec.url else [])):
            if (problem := url_problem(u)) is not None:
                field = f"urls[{j}]" if spec.urls else "url"
                raise ConfigError(f"--config {path}: engines[{i}]: field '{field}': {problem}")
        if spec.url and "${" in spec.url:
            try:
                spec.url = expand_url_env(spec.url, f"--config {path}: engines[{i}].url")
            except UrlEnvError as e:
                raise ConfigError(str(e)) from None
    return cfg


def engines_from_flags(
    engines: str | None, endpoints: list[str], *, own_command: bool = True
) -> list[EngineSpec]:
    """`--engines a,b` and `--endpoint NAME=URL` (repeatable) to engine specs. An endpoint
    may name its kind: `--endpoint mine=sglang@http://host:30000`. `own_command`: the
    refusals may offer `replay run`'s ways out (a --config file; --engines left out for all
    three); False for a command that has neither (`replay slo-search`)."""
    urls: dict[str, tuple[str | None, str | None]] = {}
    fleets: dict[str, list[str]] = {}
    for ep in endpoints:
        name, sep, rest = ep.partition("=")
        if not sep or not name or not rest:
            raise ConfigError(
                f"--endpoint '{ep}': expected NAME=URL (or NAME=KIND@URL), "
                "e.g. vllm=http://127.0.0.1:8000"
            )
        ep_kind, at, ep_url = rest.partition("@")
        if not at or "://" in ep_kind:
            ep_kind, ep_url = "", rest
        # NAME=URL1,URL2,...: an engine of replicas, which the client routes between.
        try:
            replicas = comma_items(ep_url, "--endpoint", f"{name}=URL1,URL2") or [ep_url]
        except CommaListError:
            raise ConfigError(
                f"--endpoint '{redact_urls_in(ep)}': a replica URL is empty; list the replicas "
                "with single commas, e.g. NAME=URL1,URL2"
            ) from None
        for u in replicas:
            if not u.startswith(("http://", "https://")):
                what = f"replica URL '{redact_url(u)}'" if len(replicas) > 1 else "URL"
                raise ConfigError(
                    f"--endpoint '{redact_urls_in(ep)}': {what} must start with http:// or https://"
                    + (" (replicas: NAME=URL1,URL2,...)" if len(replicas) > 1 else "")
                )
            if (problem := url_problem(u)) is not None:
                what = f"replica URL '{redact_url(u)}'" if len(replicas) > 1 else "URL"
                raise ConfigError(f"--endpoint '{redact_urls_in(ep)}': {what}: {problem}")
        refuse_repeated_replicas(replicas, f"--endpoint '{redact_urls_in(ep)}'")
        if (problem := engine_name_problem(name)) is not None:
            raise ConfigError(f"--endpoint {redact_urls_in(ep)!r}: {problem}")
        if name.strip() in urls:
            raise ConfigError(
                f"--endpoint {name.strip()} is given twice; one endpoint per engine name (name "
                f"the second one differently, e.g. {name.strip()}-2=URL, to compare both)"
            )
        urls[name.strip()] = (ep_kind or None, ep_url)
        if len(replicas) > 1:
            fleets[name.strip()] = replicas
    try:
        names = comma_items(engines or "", "--engines", "flashstate,vllm")
    except CommaListError as e:
        raise ConfigError(str(e)) from None
    if engines is not None and not names:
        raise ConfigError(
            f"--engines {engines!r}: names no engine; give e.g. --engines flashstate,vllm"
            + (" (or leave --engines out for all three)" if own_command else "")
        )
    for n in names:
        if (problem := engine_name_problem(n)) is not None:
            raise ConfigError(f"--engines {engines!r}: {problem}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(
            f"--engines {engines}: {', '.join(twice)} given twice; each engine once (name a "
            "second endpoint differently to compare two servers of one kind)"
        )
    if not names:
        names = list(urls) or ["flashstate", "vllm", "sglang"]
    unknown = [n for n in urls if n not in names]
    if unknown:
        raise ConfigError(
            f"--endpoint names {', '.join(unknown)} not in --engines {','.join(names)}"
        )
    specs = []
    for n in names:
        given, url = urls.get(n, (None, None))
        kind: str | None = given or KIND_BY_NAME.get(n)
        if kind is None:
            raise ConfigError(
                f"--engines: '{n}' is not an engine kind ({', '.join(adapter_kinds())}); give "
                f"its kind with --endpoint {n}=KIND@URL"
                + (" or use --config" if own_command else "")
            )
        many = fleets.get(n)
        spec = EngineSpec(name=n, kind=kind, url=many[0] if many else url, urls=many)
        _check_kind(spec, "--endpoint")
        specs.append(spec)
    if urls and len(urls) != len(specs):
        missing = [s.name for s in specs if s.url is None]
        raise ConfigError(
            f"--engines {', '.join(missing)} have no --endpoint; give every engine an endpoint "
            "or none (then emulators are started)"
        )
    return specs


def shared_url_warnings(specs: list[EngineSpec]) -> list[str]:
    """One line per URL that two or more engines name: they are one server with one cache,
    so each engine's hits include the other's traffic."""
    by_url: dict[str, list[str]] = {}
    for spec in specs:
        if spec.url:
            key = (redact_url(spec.url.rstrip("/")) or "").lower()
            by_url.setdefault(key, []).append(spec.name)
    return [
        f"engines {', '.join(names)} name one URL ({url}): they share that server and its "
        "cache, so each one's hit rate includes the others' traffic; give each its own server"
        for url, names in by_url.items()
        if len(names) > 1
    ]
