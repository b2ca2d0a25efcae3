"""Hugging Face datasets as trace sources, streamed (the corpus is ~2 GB).

`load_hub` streams a dataset from the hub; `load_dataset_files` streams local JSON files
through the very same `datasets` code path (what the tests use: the hub is unreachable here).
The two differ in the one `load_dataset` call of `_stream`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from replay.traces.errors import IssueSink, fail
from replay.traces.fields import Where
from replay.traces.model import Trace
from replay.traces.parse import Parsed, build_trace

HUB_TIMEOUT_S = 10.0
_OFFLINE_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


def _check_hub(name: str) -> None:
    """One quick look-up before `datasets` (which retries for ~40 s when the hub is
    unreachable): a missing, gated or unreachable dataset fails at once, saying which.
    Skipped in offline mode (a cached dataset needs no hub)."""
    if any(os.environ.get(v, "") not in ("", "0") for v in _OFFLINE_ENV):
        return
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi().dataset_info(name, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:
        fail(
            name, None, "src", "the dataset is gated: accept its terms on the hub and set HF_TOKEN"
        )
    except RepositoryNotFoundError:
        fail(
            name,
            None,
            "src",
            "no such dataset on the Hugging Face hub (or it is private: set HF_TOKEN); check "
            "the id (owner/name), or give a local .jsonl file or folder",
        )
    except Exception as exc:  # network errors come from several libraries
        fail(
            name,
            None,
            "src",
            f"could not reach the Hugging Face hub ({type(exc).__name__}: {exc}); check the "
            "network (or HF_ENDPOINT), or download the dataset and give its local files "
            "(with a cached copy, set HF_HUB_OFFLINE=1)",
        )


def _stream(name: str, data_files: Sequence[str] | None, split: str) -> Any:
    if data_files is None:
        _check_hub(name)
    import datasets  # heavy import: only when a dataset source is used

    try:
        if data_files is None:
            return datasets.load_dataset(name, split=split, streaming=True)
        return datasets.load_dataset(
            "json", data_files=list(data_files), split=split, streaming=True
        )
    except Exception as exc:  # datasets raises many types (hub, network, file)
        what = "not a local file or folder, and " if data_files is None else ""
        fail(name, None, "src", f"{what}`datasets` could not open it as a dataset: {exc}")


def load_hub(
    name: str, *, strict: bool = False, fmt: str | None = None, split: str = "train"
) -> Trace:
    """Stream `owner/name` from the Hugging Face hub."""
    return _load(name, None, strict, fmt, split)


def load_dataset_files(
    files: Sequence[str], *, strict: bool = False, fmt: str | None = None, split: str = "train"
) -> Trace:
    """Stream local JSON-lines files through `datasets` (the hub path, minus the hub)."""
    return _load(",".join(files), files, strict, fmt, split)


def _load(
    name: str, files: Sequence[str] | None, strict: bool, fmt: str | None, split: str
) -> Trace:
    sink = IssueSink(strict)
    return build_trace(_rows(_stream(name, files, split), name, sink), name, sink, fmt)


def _rows(dataset: Any, name: str, sink: IssueSink) -> Iterator[Parsed]:
    for i, row in enumerate(dataset, start=1):
        yield Where(name, i, sink), _drop_nulls(row), None, None


def _drop_nulls(value: Any) -> Any:
    """Arrow-backed rows carry every field of the inferred schema, null where a record lacks
    it; drop those so a missing field reads as missing, as in a raw JSON line."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list) and value and isinstance(value[0], dict | list):
        return [_drop_nulls(v) for v in value]
    return value
