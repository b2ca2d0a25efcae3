"""Resetting an engine's prefix cache, where the engine offers it (`replay run --reset-cache`).

vLLM serves `POST /reset_prefix_cache` (answering `{"success": bool}`) only when started with
`VLLM_SERVER_DEV_MODE=1`; without it the route is a 404. It refuses (`success: false`) while
blocks are held, by running requests or KV transfers in flight, and callers may retry.
SGLang serves `POST /flush_cache`: 200 when flushed, 400 while requests run or wait. The
emulators serve their protocol's route. An OpenAI-compatible server offers nothing.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp

# The route of each engine kind that has one (flashstate is a vLLM fork).
RESET_ROUTES: dict[str, str] = {
    "vllm": "/reset_prefix_cache",
    "flashstate": "/reset_prefix_cache",
    "sglang": "/flush_cache",
}
FLAG = "--reset-cache"
ATTEMPTS = 5  # a refusal while blocks are held is retried this many times in all
RETRY_S = 1.0


class CacheResetError(Exception):
    """An engine offers no reset, or did not reset; the message names the flag and the fix."""


@dataclass(frozen=True)
class ResetResult:
    """One engine's reset at one point of the run (the manifest's `cache_reset`)."""

    route: str
    ok: bool
    attempts: int
    detail: str  # the last answer, e.g. '{"success": true}' or 'HTTP 404'

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def no_reset_reason(name: str, kind: str) -> str | None:
    """Why engine `name` of `kind` cannot be reset at all (None: it has a route)."""
    if kind in RESET_ROUTES:
        return None
    return (
        f"{FLAG}: engine {name!r} (kind {kind}) offers no prefix-cache reset; run without "
        f"{FLAG}, or restart the engine before the run for a cold cache"
    )


def _fix(name: str, kind: str, route: str, status: int) -> str:
    if status == 404 and kind != "sglang":
        return (
            f"{FLAG}: engine {name!r} answered 404 to POST {route}: vLLM serves it only in dev "
            f"mode; start vLLM with VLLM_SERVER_DEV_MODE=1 (or run without {FLAG})"
        )
    return (
        f"{FLAG}: engine {name!r} answered HTTP {status} to POST {route}; run without {FLAG}, "
        "or restart the engine before the run for a cold cache"
    )


async def reset_prefix_cache(
    session: aiohttp.ClientSession,
    name: str,
    kind: str,
    url: str,
    *,
    attempts: int = ATTEMPTS,
    retry_s: float = RETRY_S,
) -> ResetResult:
    """Reset engine `name`'s prefix cache, retrying a refusal (busy) `attempts` times in
    all; raises `CacheResetError` where the engine offers no reset (unknown kind, a 404)
    or cannot be reached."""
    why = no_reset_reason(name, kind)
    if why is not None:
        raise CacheResetError(why)
    route = RESET_ROUTES[kind]
    detail = ""
    for attempt in range(1, attempts + 1):
        try:
            async with session.post(
                url.rstrip("/") + route, timeout=aiohttp.ClientTimeout(total=30)
            ) as resp:
                body = (await resp.text()).strip()
                status = resp.status
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            raise CacheResetError(
                f"{FLAG}: engine {name!r} could not be reached at {url} ({type(e).__name__}: {e})"
            ) from None
        detail = body[:200] if status == 200 else f"HTTP {status}: {body[:200]}"
        busy = status == 400 and kind == "sglang"
        if status != 200 and not busy:
            raise CacheResetError(_fix(name, kind, route, status))
        if status == 200 and (kind == "sglang" or _success(body)):
            return ResetResult(route, True, attempt, detail)
        if attempt < attempts:
            await asyncio.sleep(retry_s)
    return ResetResult(route, False, attempts, detail)


def _success(body: str) -> bool:
    """vLLM's answer `{"success": true}` (anything else: not reset)."""
    try:
        return bool(json.loads(body).get("success"))
    except (ValueError, AttributeError):
        return False


async def reset_all(
    engines: list[tuple[str, str, str]], *, attempts: int = ATTEMPTS, retry_s: float = RETRY_S
) -> dict[str, ResetResult]:
    """Reset every (name, kind, url) engine at once; raises `CacheResetError` naming the
    first that cannot (no reset offered, unreachable, or still refusing after retries)."""
    async with aiohttp.ClientSession() as session:
        results = await asyncio.gather(
            *(reset_prefix_cache(session, n, k, u, attempts=attempts, retry_s=retry_s)
              for n, k, u in engines),
        )  # fmt: skip
    out = {n: r for (n, _, _), r in zip(engines, results, strict=True)}
    for name, r in out.items():
        if not r.ok:
            raise CacheResetError(
                f"{FLAG}: engine {name!r} refused to reset its prefix cache {r.attempts} times "
                f"(last answer {r.detail}): blocks are still held; wait for its requests to "
                f"end, or run without {FLAG}"
            )
    return out


__all__ = [
    "FLAG",
    "RESET_ROUTES",
    "CacheResetError",
    "ResetResult",
    "no_reset_reason",
    "reset_all",
    "reset_prefix_cache",
]
