"""Price sheets and GPU rental rates: the data in `configs/pricing/`, validated.

Two YAML files live in the pricing directory:

- `sheets.yaml`: `default` (a sheet name) and `sheets`, a mapping of name → `PriceSheet`
  (US dollars per 1M tokens: `input`, `cached`, optional `cache_write`, `output`, optional
  `cached_host` / `cached_external` for hits served from host memory / an external store).
- `gpus.yaml`: `default` (a GPU name) and `gpus`, a mapping of name → `GpuRate`
  (US dollars per GPU-hour).

Every function takes the directory as an argument; left out, it is `$REPLAY_CONFIG_DIR/pricing`
when that variable is set (the same convention as `replay.config_paths`), else the
`configs/pricing` folder beside this package. This module imports nothing else of ours.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
)

SHEETS_FILE = "sheets.yaml"
GPUS_FILE = "gpus.yaml"

Status = Literal["published", "reported", "illustrative"]

# Upper bounds of a sheet's prices and a GPU's rate (issue 36: a rate of 1e308 passed and the
# formulas, exact decimals of 28 digits, failed with `decimal.InvalidOperation`). A million
# dollars per 1M tokens, or per GPU-hour, is thousands of times any list; with token rates
# bounded too (`MAX_TOKEN_RATE`) every figure fits the decimals with room to spare.
MAX_PRICE = 1_000_000
MAX_GPU_RATE = 1_000_000
# Tokens per minute per GPU: 10^12 is a million times the fastest engine measured.
MAX_TOKEN_RATE = 10**12
# USD per GiB of host memory per hour, whether gpus.yaml's `host_memory` or
# `--host-usd-per-gb-hour` gives it: over a million times the shipped DRAM rate
# (docs/pricing.md), so a typo in the exponent is caught. The file's rate had the GPU rate's
# bound (1,000,000), which the flag and the dashboard's rate input refused (issue 34).
MAX_HOST_RATE = 1_000


class PricingError(ValueError):
    """Bad pricing input: a malformed file, an unknown name, a value out of range."""


class PricingConfigError(PricingError):
    """A pricing file that is missing or malformed; the message names the file and field."""


class UnknownNameError(PricingError):
    """A sheet or GPU name that the data does not define; carries the valid choices."""

    def __init__(self, kind: str, name: str, choices: list[str], where: Path) -> None:
        self.kind = kind
        self.name = name
        self.choices = choices
        self.where = where
        listed = ", ".join(choices) or "none"
        super().__init__(f"unknown {kind} '{name}' (in {where}); choose one of: {listed}")


def _to_str(value: Any) -> Any:
    # YAML reads `2026-11-09` as a date and `2025` as an int; both are fine as labels.
    return value if isinstance(value, str) or value is None else str(value)


class _Described(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="the entry's key in the YAML mapping")
    source: str = Field(min_length=1, description="where the figures come from")
    date: str = Field(min_length=1, description="when the source gave them (YYYY-MM-DD or YYYY)")
    status: Status = Field(
        description="published (checked on `date`), reported (quoted by a third party), "
        "illustrative (unchecked, replace before quoting)"
    )
    notes: str = Field("", description="anything a reader should know")

    _to_str_date = field_validator("date", mode="before")(_to_str)


class PriceSheet(_Described):
    """What a user pays, in US dollars per 1M tokens.

    `cache_write`, when set, is what each prompt token written to the provider's cache costs
    instead of `input` (a cache-write premium, e.g. 1.25× input on an Anthropic-style list).
    Which tokens are written is the `write_fraction` argument of the formulas: by default
    every uncached prompt token, because an agent's next turn resumes from the end of this one.
    """

    label: str = Field("", description="a human name for the list")
    model: str = Field("", description="the model (class) the list prices")
    input: Decimal = Field(
        description="USD per 1M uncached prompt tokens", ge=0, le=MAX_PRICE, allow_inf_nan=False
    )
    cached: Decimal = Field(
        description="USD per 1M prompt tokens read from cache",
        ge=0,
        le=MAX_PRICE,
        allow_inf_nan=False,
    )
    output: Decimal = Field(
        description="USD per 1M generated tokens", ge=0, le=MAX_PRICE, allow_inf_nan=False
    )
    cache_write: Decimal | None = Field(
        None,
        description="USD per 1M prompt tokens written to cache; None: same as input",
        ge=0,
        le=MAX_PRICE,
        allow_inf_nan=False,
    )

    # A cached token served from host memory or an external store, where the list prices
    # that tier apart (issue 34 point 4: "priced as the price sheet says for that tier").
    # None: the sheet's `cached`, as every list in configs/pricing bills one cache-read
    # price whatever tier served the hit.
    cached_host: Decimal | None = Field(
        None,
        description="USD per 1M prompt tokens read from a host-memory cache tier; None: cached",
        ge=0,
        le=MAX_PRICE,
        allow_inf_nan=False,
    )
    cached_external: Decimal | None = Field(
        None,
        description="USD per 1M prompt tokens read from an external cache store; None: cached",
        ge=0,
        le=MAX_PRICE,
        allow_inf_nan=False,
    )

    @model_serializer(mode="wrap")
    def _without_unset_tiers(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A sheet that prices no tier apart dumps as it did before tiers (`replay price --list
        # --json`).
        data: dict[str, Any] = handler(self)
        for key in ("cached_host", "cached_external"):
            if data.get(key, 0) is None:
                del data[key]
        return data

    @property
    def host_cached_price(self) -> Decimal:
        """USD per 1M cached tokens host memory served (`cached` unless priced apart)."""
        return self.cached if self.cached_host is None else self.cached_host

    @property
    def external_cached_price(self) -> Decimal:
        """USD per 1M cached tokens an external store served (`cached` unless priced apart)."""
        return self.cached if self.cached_external is None else self.cached_external

    @property
    def prices_tiers(self) -> bool:
        """Whether the sheet prices a cache tier apart from the GPU's hits."""
        return self.cached_host is not None or self.cached_external is not None

    @property
    def write_price(self) -> Decimal:
        """USD per 1M prompt tokens written to cache (`input` when the sheet has no premium)."""
        return self.input if self.cache_write is None else self.cache_write

    @property
    def cached_discount(self) -> Decimal:
        """1 − cached/input: the share of the input price a cache hit saves (0 if input is 0)."""
        return Decimal(0) if self.input == 0 else 1 - self.cached / self.input

    @property
    def write_multiplier(self) -> Decimal:
        """cache-write price ÷ input price (1 without a premium, 1.25 Anthropic-style)."""
        return Decimal(1) if self.input == 0 else self.write_price / self.input


class GpuRate(_Described):
    """What a provider pays to rent one GPU for one hour, in US dollars."""

    gpu: str = Field(min_length=1, description="GPU model as profiles and manifests name it")
    provider: str = Field("", description="who rents it at this rate")
    rate_per_gpu_hour: Decimal = Field(
        description="USD per GPU-hour", ge=0, le=MAX_GPU_RATE, allow_inf_nan=False
    )


class HostMemoryRate(_Described):
    """What a provider pays for the host memory (DRAM) a cache tier holds, US dollars per
    GiB-hour (issue 34 point 4: "the provider's cost counts host memory at a rate per
    GB-hour"); `gpus.yaml`'s optional `host_memory` entry."""

    usd_per_gb_hour: Decimal = Field(
        description="USD per GiB of host memory per hour",
        ge=0,
        le=MAX_HOST_RATE,
        allow_inf_nan=False,
    )


class _SheetsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    default: str = Field(description="the sheet used when none is named")
    sheets: dict[str, dict[str, Any]] = Field(min_length=1)


class _GpusFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    default: str = Field(description="the GPU used when none is named")
    gpus: dict[str, dict[str, Any]] = Field(min_length=1)
    host_memory: dict[str, Any] | None = Field(None, description="a `HostMemoryRate`")


E = TypeVar("E", PriceSheet, GpuRate)


@dataclass(frozen=True)
class Catalog(Generic[E]):
    """Every entry of one pricing file, in file order, with the file's default name."""

    path: Path
    default: str
    entries: Mapping[str, E]

    @property
    def names(self) -> list[str]:
        return list(self.entries)


def default_pricing_dir() -> Path:
    """`$REPLAY_CONFIG_DIR/pricing` if that variable is set, else `configs/pricing` beside
    this package (the repository layout)."""
    env = os.environ.get("REPLAY_CONFIG_DIR")
    if env:
        return Path(env) / "pricing"
    return Path(__file__).resolve().parents[1] / "configs" / "pricing"


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise PricingConfigError(
            f"{path}: missing; pass the pricing directory or set REPLAY_CONFIG_DIR "
            "to a folder holding pricing/{sheets,gpus}.yaml"
        )
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise PricingConfigError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise PricingConfigError(f"{path}: expected a mapping at the top level")
    return data


def _explain(
    path: Path, prefix: tuple[Any, ...], err: ValidationError, model: type[BaseModel]
) -> PricingConfigError:
    """One message naming the file, the dotted field and the fix, for the most telling error
    (an unknown key first: a typo also makes the intended key look missing); the rest are
    counted so a user sees exactly where to look."""
    errors = sorted(err.errors(), key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    loc = ".".join(str(x) for x in (*prefix, *first["loc"]))
    if first["type"] == "extra_forbidden":
        known = [k for k in model.model_fields if k != "name"]
        close = difflib.get_close_matches(str(first["loc"][-1]), known, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(known)}"
        what = f"unknown key ({hint})"
    elif first["type"] == "missing":
        what = "required key is missing"
    elif first["type"] == "less_than_equal":
        le = (first.get("ctx") or {}).get("le")
        unit = (
            "US dollars per GPU-hour"
            if loc.endswith("rate_per_gpu_hour")
            else "US dollars per GiB-hour"
            if loc.endswith("usd_per_gb_hour")
            else "US dollars per 1M tokens"
        )
        what = (
            f"must be at most {le:,} {unit}, thousands of times any list's (got "
            f"{first.get('input')!r}); fix the value"
        )
    else:
        what = f"{first['msg']} (got {first.get('input')!r})"
    more = len(errors) - 1
    tail = f" (+{more} more problem{'s' if more > 1 else ''})" if more else ""
    return PricingConfigError(f"{path}: field '{loc}': {what}{tail}")


def _load_catalog(
    path: Path, file_model: type[_SheetsFile] | type[_GpusFile], key: str, entry: type[E]
) -> Catalog[E]:
    data = _read_yaml(path)
    try:
        parsed = file_model.model_validate(data)
    except ValidationError as e:
        raise _explain(path, (), e, file_model) from e
    raw: dict[str, dict[str, Any]] = getattr(parsed, key)
    entries: dict[str, E] = {}
    for name, fields in raw.items():
        if not isinstance(fields, dict):
            raise PricingConfigError(f"{path}: field '{key}.{name}': expected a mapping")
        if "name" in fields:
            raise PricingConfigError(
                f"{path}: field '{key}.{name}.name': unknown key (the entry's key is its name)"
            )
        try:
            entries[name] = entry.model_validate({"name": name, **fields})
        except ValidationError as e:
            raise _explain(path, (key, name), e, entry) from e
    if parsed.default not in entries:
        raise PricingConfigError(
            f"{path}: field 'default': '{parsed.default}' is not one of the {key} "
            f"({', '.join(entries)})"
        )
    return Catalog(path=path, default=parsed.default, entries=entries)


def load_sheets(pricing_dir: Path | str | None = None) -> Catalog[PriceSheet]:
    """The price sheets of `pricing_dir/sheets.yaml` (see `default_pricing_dir`).

    Raises `PricingConfigError` naming the file and field on any unknown key, missing field,
    negative or non-finite price.
    """
    base = Path(pricing_dir) if pricing_dir is not None else default_pricing_dir()
    return _load_catalog(base / SHEETS_FILE, _SheetsFile, "sheets", PriceSheet)


def load_gpu_rates(pricing_dir: Path | str | None = None) -> Catalog[GpuRate]:
    """The GPU rental rates of `pricing_dir/gpus.yaml` (see `default_pricing_dir`)."""
    base = Path(pricing_dir) if pricing_dir is not None else default_pricing_dir()
    return _load_catalog(base / GPUS_FILE, _GpusFile, "gpus", GpuRate)


def get_host_memory_rate(pricing_dir: Path | str | None = None) -> HostMemoryRate | None:
    """The host-memory rate of `pricing_dir/gpus.yaml` (its `host_memory` entry), None where
    the file gives none. Raises `PricingConfigError` naming the field for a bad one."""
    base = Path(pricing_dir) if pricing_dir is not None else default_pricing_dir()
    path = base / GPUS_FILE
    try:
        raw = _GpusFile.model_validate(_read_yaml(path)).host_memory
    except ValidationError as e:
        raise _explain(path, (), e, _GpusFile) from e
    if raw is None:
        return None
    try:
        return HostMemoryRate.model_validate({"name": "host_memory", **raw})
    except ValidationError as e:
        raise _explain(path, ("host_memory",), e, HostMemoryRate) from e


def get_sheet(name: str | None = None, pricing_dir: Path | str | None = None) -> PriceSheet:
    """One price sheet by name (the file's default when `name` is None).

    Raises `UnknownNameError` (with `.choices`) when no sheet has that name.
    """
    catalog = load_sheets(pricing_dir)
    key = catalog.default if name is None else name
    if key not in catalog.entries:
        raise UnknownNameError("price sheet", key, catalog.names, catalog.path)
    return catalog.entries[key]


def get_gpu_rate(name: str | None = None, pricing_dir: Path | str | None = None) -> GpuRate:
    """One GPU rate by name or GPU model, case-insensitively ("b200" or "B200"); the file's
    default when `name` is None. Raises `UnknownNameError` listing the valid names."""
    catalog = load_gpu_rates(pricing_dir)
    key = catalog.default if name is None else name
    wanted = key.casefold()
    for entry in catalog.entries.values():
        if wanted in (entry.name.casefold(), entry.gpu.casefold()):
            return entry
    raise UnknownNameError("GPU", key, catalog.names, catalog.path)
