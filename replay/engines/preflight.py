"""Preflight: is an engine endpoint fit for a live replay? Checked before any timed request.

Interface (used by `replay run` before every run and by `replay engines preflight NAME|URL`)::

    from replay.engines.preflight import preflight

    report = await preflight("http://127.0.0.1:8000", "vllm", model=None)
    report.ok            # every required check passed
    report.checks        # [Check(name, ok, detail, fix, required)], in the order run
    report.failures      # the required checks that failed
    report.message()     # multi-line text: what failed and exactly what to change
    report.model         # the served model (the first listed when `model` was None)
    report.block_size    # from vLLM's `vllm:cache_config_info` (None where not published)
    report.hybrid        # a hybrid engine's cache settings (replay.engines.hybrid), else None
    report.align_probe   # {tokens, cached, block} of the align-rule probe (hybrid only)
    report.context_tokens, report.server_version, report.server_info
    report.emulator      # an emulator's /get_server_info (replay.server_info.ServerInfo) or None
    report.as_dict()     # JSON-able, for the run manifest

Checks, in order (a check that cannot run because an earlier one failed is reported as
skipped, `ok=None`): `reachable`, `model listed`, `metrics readable`, `token-id prompts`,
`generated ids returned`, `cached-token reporting`, `prefix caching`, on a hybrid engine
(`mamba_cache_mode` in `vllm:cache_config_info`) `hybrid align rule` (an exact resend must
report ⌊(n−1)/B⌋·B cached tokens; it catches the block-size trap), and the warm-cache
guard `cold cache` (a warning, never a failure; `warm_cache_check`); an emulator whose
`/get_server_info` is not this harness's shape adds the informative check `server info`. The two cache probes
send the same fresh random prompt twice (a few block sizes long); the second must report
cached tokens. `kind` is an adapter kind (`vllm`, `flashstate`, `sglang`, `openai`); for
`openai` (hosted text endpoints) the token-level checks are informative, not required.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp
import numpy as np
import orjson

from replay.engines.adapters import Limits, make_adapter, make_session
from replay.engines.adapters.base import StreamResult
from replay.engines.hybrid import ALIGN_CHECK, HybridCache, align_check, hybrid_cache
from replay.engines.scrape import MetricsError, block_size_from_metrics, cache_config, parse_metrics
from replay.redact import redact_url, url_secrets
from replay.server_info import ServerInfo, ServerInfoError, parse_server_info

# Flags that turn on what the checks need, by engine kind.
CACHE_REPORT_FLAG = {
    "vllm": "--enable-prompt-tokens-details",
    "flashstate": "--enable-prompt-tokens-details",
    "sglang": "--enable-cache-report",
}
PREFIX_CACHE_FIX = {
    "vllm": "start vLLM with --enable-prefix-caching (and without --no-enable-prefix-caching)",
    "flashstate": "start the server with --enable-prefix-caching",
    "sglang": "start SGLang without --disable-radix-cache",
}
HIT_COUNTERS = ("vllm:prefix_cache_hits_total", "sglang:cached_tokens_total")
# Prompt tokens the engine has looked up in its prefix cache since it started.
QUERY_COUNTERS = ("vllm:prefix_cache_queries_total", "sglang:prompt_tokens_total")
USAGE_GAUGES = ("vllm:kv_cache_usage_perc", "sglang:token_usage")
RESET_CACHE_FIX = {
    "vllm": "restart the engine, or start it with VLLM_SERVER_DEV_MODE=1 and "
    "POST /reset_prefix_cache before the run",
    "flashstate": "restart the engine, or start it with VLLM_SERVER_DEV_MODE=1 and "
    "POST /reset_prefix_cache before the run",
    "sglang": "restart the engine, or POST /flush_cache before the run",
}


@dataclass(slots=True)
class Check:
    name: str
    ok: bool | None  # None: skipped
    detail: str
    fix: str = ""
    required: bool = True


@dataclass(slots=True)
class PreflightReport:
    url: str
    kind: str
    model: str | None
    checks: list[Check] = field(default_factory=list)
    block_size: int | None = None
    hybrid: HybridCache | None = None
    align_probe: dict[str, int] | None = None
    context_tokens: int | None = None
    server_version: str | None = None
    # /get_server_info's scalars (the manifest's flags) and an emulator's `engine_model`
    server_info: dict[str, Any] = field(default_factory=dict)
    emulator: ServerInfo | None = None  # an emulator's answer, parsed (replay.server_info)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks if c.required)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.required and not c.ok]

    def message(self) -> str:
        if self.ok:
            passed = sum(1 for c in self.checks if c.ok)
            if passed == len(self.checks):
                return f"{self.kind} engine at {self.url}: all {passed} checks passed"
            # "passed" only for checks that ran and passed; the rest are named.
            lines = [
                f"{self.kind} engine at {self.url}: ready ({passed} of {len(self.checks)} "
                "checks passed; the others are informative for this kind)"
            ]
            for c in self.checks:
                if not c.ok:
                    state = "not run" if c.ok is None else "failed"
                    lines.append(f"  - {c.name} {state}: {c.detail}")
            return "\n".join(lines)
        lines = [f"{self.kind} engine at {self.url} is not ready for a live replay:"]
        for c in self.failures:
            state = "skipped" if c.ok is None else "FAILED"
            lines.append(f"  - {c.name} {state}: {c.detail}" + (f" Fix: {c.fix}" if c.fix else ""))
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        d["hybrid"] = self.hybrid.as_dict() if self.hybrid is not None else None
        d["emulator"] = self.emulator.model_dump() if self.emulator is not None else None
        return d


def _auth_fix(status: int, kind: str, options: dict[str, Any], sent_key: bool) -> str:
    env = options.get("api_key_env") or "OPENAI_API_KEY"
    if kind != "openai":
        return (
            f"the server answered {status}: it wants credentials the harness does not send for "
            f"kind {kind}; serve it without an API key, or use kind openai with api_key_env"
        )
    if not sent_key:
        return f"set the API key in the environment variable {env} (it is unset or empty)"
    verb = "rejected" if status == 401 else "not allowed to use this endpoint or model"
    return (
        f"the API key in {env} was {verb} ({status}): check the key, its project or its "
        "permissions (and api_key_env in --config if a different variable holds it)"
    )


def _skip(report: PreflightReport, names: list[str], why: str, required: bool = True) -> None:
    for n in names:
        report.checks.append(Check(n, None, f"not run: {why}.", required=required))


async def _get(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str]
) -> tuple[int, bytes]:
    async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=15)) as r:
        return r.status, await r.read()


def warm_cache_check(metrics_text: str | None, kind: str) -> Check:
    """Warm-cache guard (not required: a warning). Read before any probe: prompt tokens the
    engine already served and hit, and how full its cache is. A warm cache makes the first
    minutes of a run hit prefixes an earlier run left (vLLM users report TTFT up to 49×
    lower between repeated runs, vllm issues 54227 and 52884); the per-run salt keeps this
    run's own prompts apart, but shared system prompts and capacity are still affected."""
    name = "cold cache"
    if not metrics_text:
        return Check(name, None, "not run: /metrics is not readable.", required=False)
    try:
        samples = parse_metrics(
            metrics_text, frozenset((*QUERY_COUNTERS, *HIT_COUNTERS, *USAGE_GAUGES))
        )
    except MetricsError:
        return Check(name, None, "not run: /metrics did not parse.", required=False)
    sums: dict[str, float] = {}
    for s in samples:
        sums[s.name] = sums.get(s.name, 0.0) + s.value
    queried = sum(sums.get(n, 0.0) for n in QUERY_COUNTERS)
    hits = sum(sums.get(n, 0.0) for n in HIT_COUNTERS)
    usage = max((sums[n] for n in USAGE_GAUGES if n in sums), default=0.0)
    if queried <= 0 and usage <= 0:
        return Check(
            name, True, "no earlier traffic: the prefix-cache counters are at 0.", required=False
        )
    return Check(
        name,
        False,
        f"the engine served earlier traffic: {queried:,.0f} prompt tokens looked up, "
        f"{hits:,.0f} hit, cache {usage:.0%} full. The first minutes of this run may hit "
        "what that traffic left (the report shows the first minutes' hit rate).",
        RESET_CACHE_FIX.get(kind, "restart the engine before the run"),
        required=False,
    )


def _hits(metrics_text: str | None) -> float | None:
    if not metrics_text:
        return None
    try:
        samples = parse_metrics(metrics_text, frozenset(HIT_COUNTERS))
    except MetricsError:
        return None
    return sum(s.value for s in samples) if samples else None


async def preflight(
    url: str,
    kind: str,
    model: str | None = None,
    *,
    vocab_size: int = 32000,
    probe_tokens: int | None = None,
    headers: dict[str, str] | None = None,
    timeout_s: float = 300.0,
    adapter_options: dict[str, Any] | None = None,
) -> PreflightReport:
    """Run every check against the endpoint at `url`; never raises for engine faults. The
    report (and every message) shows the URL with its userinfo masked."""
    url = url.rstrip("/")
    report = PreflightReport(redact_url(url) or url, kind, model)
    token_level = kind != "openai"
    hdrs = dict(headers or {})
    if kind == "openai":  # hosted endpoints want the key even for /v1/models; never logged
        key = os.environ.get((adapter_options or {}).get("api_key_env", "OPENAI_API_KEY"))
        if key:
            hdrs.setdefault("Authorization", f"Bearer {key}")
    limits = Limits(request_timeout_s=timeout_s, first_token_timeout_s=timeout_s)
    session = make_session(limits)
    try:
        await _run_checks(
            report,
            url,
            session,
            hdrs,
            limits,
            vocab_size,
            probe_tokens,
            token_level,
            adapter_options or {},
        )
    finally:
        await session.close()
    return report


async def _run_checks(
    report: PreflightReport,
    url: str,
    session: aiohttp.ClientSession,
    hdrs: dict[str, str],
    limits: Limits,
    vocab_size: int,
    probe_tokens: int | None,
    token_level: bool,
    adapter_options: dict[str, Any],
) -> None:
    kind = report.kind
    later = [
        "model listed",
        "metrics readable",
        "token-id prompts",
        "generated ids returned",
        "cached-token reporting",
        "prefix caching",
    ]
    # reachable ---------------------------------------------------------------------------
    # A hosted URL may already end in /v1 (the openai package's base_url convention).
    models = "/models" if url.endswith("/v1") else "/v1/models"
    health = models if kind == "openai" else "/health"
    status = 0
    if url_secrets(url) and hdrs.get("Authorization"):
        report.checks.append(
            Check(
                "reachable",
                False,
                "the URL carries credentials (user:password@) and an API key is set as well.",
                "an endpoint takes one kind of credentials: drop the user:password@ part of the "
                "URL, or unset the API key variable",
            )
        )
        _skip(report, later, "the credentials conflict")
        return
    try:
        status, _ = await _get(session, url + health, hdrs)
        ok = status == 200
        detail = f"GET {health} answered {status}."
    except (aiohttp.ClientError, OSError, TimeoutError) as e:
        ok, detail = False, f"GET {health} failed ({type(e).__name__})."
    fix = "" if ok else f"start the engine, or fix the URL {report.url}"
    if status in (401, 403):
        fix = _auth_fix(status, kind, adapter_options, bool(hdrs.get("Authorization")))
    report.checks.append(Check("reachable", ok, detail, fix))
    if not ok:
        refused = status in (401, 403)
        _skip(report, later, "the endpoint refused the credentials" if refused else "unreachable")
        return
    # model listed ------------------------------------------------------------------------
    served: list[str] = []
    status = 0
    try:
        status, body = await _get(session, url + models, hdrs)
        data = orjson.loads(body) if status == 200 else {}
        for m in data.get("data", []):
            served.append(str(m.get("id")))
            if report.context_tokens is None and m.get("max_model_len"):
                report.context_tokens = int(m["max_model_len"])
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError, AttributeError):
        pass
    if report.model is None and served:
        report.model = served[0]
    if status in (401, 403):
        report.checks.append(
            Check(
                "model listed",
                False,
                f"GET {models} answered {status}.",
                _auth_fix(status, kind, adapter_options, bool(hdrs.get("Authorization"))),
            )
        )
    elif report.model is not None and report.model in served:
        report.checks.append(Check("model listed", True, f"serves '{report.model}'."))
    elif not served:
        report.checks.append(
            Check(
                "model listed",
                False,
                "GET /v1/models listed no model.",
                "check that the server finished loading its model",
            )
        )
    else:
        report.checks.append(
            Check(
                "model listed",
                False,
                f"model '{report.model}' is not served; the server lists: {', '.join(served)}.",
                "set the engine's model to one of those (--config model:, or omit it)",
            )
        )
    # version and server info (informative) ------------------------------------------------
    for path in ("/version", "/get_server_info"):
        try:
            status, body = await _get(session, url + path, hdrs)
            if status == 200:
                info = orjson.loads(body)
                if isinstance(info, dict):
                    report.server_version = str(info.get("version", report.server_version or ""))
                    if path == "/get_server_info":
                        _read_server_info(report, info)
                    if report.context_tokens is None and info.get("context_length"):
                        report.context_tokens = int(info["context_length"])
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError, AttributeError):
            pass
    # metrics -----------------------------------------------------------------------------
    metrics_text: str | None = None
    try:
        status, body = await _get(session, url + "/metrics", hdrs)
        if status == 200:
            metrics_text = body.decode("utf-8", "replace")
            parse_metrics(metrics_text)
            report.block_size = block_size_from_metrics(metrics_text)
            labels = cache_config(metrics_text)
            report.hybrid = hybrid_cache(labels)
            report.server_info.update({f"cache_config.{k}": v for k, v in labels.items()})
            report.checks.append(
                Check(
                    "metrics readable",
                    True,
                    f"/metrics parsed; block size {report.block_size or 'not published'}.",
                    required=token_level,
                )
            )
        else:
            raise MetricsError(f"GET /metrics answered {status}")
    except (aiohttp.ClientError, OSError, TimeoutError, MetricsError) as e:
        metrics_text = None
        fix = (
            "start SGLang with --enable-metrics"
            if kind == "sglang"
            else "serve Prometheus metrics on /metrics (vLLM does by default)"
        )
        report.checks.append(Check("metrics readable", False, f"{e}.", fix, required=token_level))
    # Read before the probes (they are traffic too); reported after them.
    warm = warm_cache_check(metrics_text, kind) if token_level else None
    # probes ------------------------------------------------------------------------------
    await _probe(
        report,
        url,
        session,
        limits,
        metrics_text,
        vocab_size,
        probe_tokens,
        token_level,
        hdrs,
        adapter_options,
    )
    if warm is not None:
        report.checks.append(warm)


def _read_server_info(report: PreflightReport, info: dict[str, Any]) -> None:
    """An emulator's answer (`"emulator": true`) parsed strictly as `replay.server_info.
    ServerInfo` (`report.emulator`); a real server's scalars kept as they came."""
    try:
        ours = parse_server_info(info)
    except ServerInfoError as e:
        ours = None
        report.checks.append(
            Check(
                "server info",
                False,
                f"{e}; its settings are read as a real server's.",
                "run an emulator of this harness's version (python -m replay.emulator)",
                required=False,
            )
        )
    report.emulator = ours
    if ours is not None:
        report.server_info.update(ours.flat())
        return
    report.server_info.update(
        {
            k: v
            for k, v in info.items()
            if isinstance(v, (str, int, float, bool))
            # an emulator of another version: its engine model as it came
            or (k == "engine_model" and isinstance(v, dict))
        }
    )


async def _probe(
    report: PreflightReport,
    url: str,
    session: aiohttp.ClientSession,
    limits: Limits,
    metrics_before: str | None,
    vocab_size: int,
    probe_tokens: int | None,
    token_level: bool,
    hdrs: dict[str, str],
    adapter_options: dict[str, Any],
) -> None:
    kind = report.kind
    # Half a block past a block boundary: a hybrid engine resumes only from a state strictly
    # inside the prompt (hits are capped at n - 1), and SGLang keeps a prefill's state at the
    # last grid point of its chunk; a block-multiple prompt would put that state at its very
    # end and report no hit on a healthy engine.
    # Through a router (no engine /metrics) an emulator's /get_server_info names its block.
    emulated = report.emulator.block_tokens if report.emulator is not None else None
    hybrid = report.hybrid.attention_block if report.hybrid is not None else None
    block = hybrid or report.block_size or emulated or 256
    n = probe_tokens or max(4 * block, 1024) + block // 2
    if report.context_tokens:
        n = min(n, max(report.context_tokens // 2 - 16, 16))
    # A fresh prompt no earlier request can have cached: a nonce seeds the generator.
    rng = np.random.default_rng(secrets.randbits(64))
    ids = rng.integers(256, max(vocab_size - 1024, 512), size=n, dtype=np.int64)
    adapter = make_adapter(
        kind, url, report.model, limits=limits, session=session, headers=hdrs, **adapter_options
    )
    try:
        first = await adapter.generate(adapter.build_body(ids, 4), StreamResult())
        if first.status != "ok":
            report.checks.append(
                Check(
                    "token-id prompts",
                    False,
                    f"a {n}-token token-id prompt failed: {first.error}.",
                    "check the engine accepts token-id prompts and that vocab_size "
                    f"({vocab_size}) fits the model's vocabulary",
                    required=token_level,
                )
            )
            _skip(
                report,
                ["generated ids returned", "cached-token reporting", "prefix caching"],
                "the probe request failed",
                required=token_level,
            )
            return
        report.checks.append(
            Check(
                "token-id prompts",
                True,
                f"a {n}-token token-id prompt was served.",
                required=token_level,
            )
        )
        got = len(first.output_ids)
        ok_ids = got >= 1 and adapter.exact_ids
        fix_ids = (
            "use vLLM ≥ 0.10.2 (the `return_token_ids` request field)"
            if kind in ("vllm", "flashstate")
            else "check the server streams output_ids"
        )
        report.checks.append(
            Check(
                "generated ids returned",
                ok_ids,
                f"the stream carried {got} generated id(s)"
                + ("" if adapter.exact_ids else " as text (not exact: hosted endpoint)")
                + ".",
                "" if ok_ids else fix_ids,
                required=token_level,
            )
        )
        second = await adapter.generate(adapter.build_body(ids, 1), StreamResult())
        metrics_after = None
        if metrics_before is not None:
            try:
                status, body = await _get(session, url + "/metrics", hdrs)
                metrics_after = body.decode("utf-8", "replace") if status == 200 else None
            except (aiohttp.ClientError, OSError, TimeoutError):
                metrics_after = None
        h0, h1 = _hits(metrics_before), _hits(metrics_after)
        counter_hit = h0 is not None and h1 is not None and h1 > h0
        seen = first.cached_field_seen or second.cached_field_seen
        cached = second.cached_tokens or 0
        flag = CACHE_REPORT_FLAG.get(kind, "")
        if second.status != "ok":
            _skip(
                report,
                ["cached-token reporting", "prefix caching"],
                f"the repeated probe failed ({second.error})",
                required=token_level,
            )
            return
        if seen or cached > 0:
            report.checks.append(
                Check(
                    "cached-token reporting",
                    True,
                    "requests report cached tokens.",
                    required=token_level,
                )
            )
        else:
            why = (
                "the engine's counters show a hit the response did not report"
                if counter_hit
                else "no response carried a cached-token field"
            )
            report.checks.append(
                Check(
                    "cached-token reporting",
                    False,
                    why + ".",
                    f"start the engine with {flag}"
                    if flag
                    else "the endpoint does not report cached tokens",
                    required=token_level,
                )
            )
        verdict = align_check(report.hybrid, n, cached) if report.hybrid is not None else None
        if cached > 0 or counter_hit:
            report.checks.append(
                Check(
                    "prefix caching",
                    True,
                    f"the repeated {n}-token probe reported {cached} cached tokens.",
                    required=token_level,
                )
            )
        else:
            report.checks.append(
                Check(
                    "prefix caching",
                    False,
                    f"the repeated {n}-token probe reported no cached tokens"
                    + ("" if seen else " and the engine's hit counter did not move")
                    + ".",
                    verdict.fix
                    if verdict is not None and verdict.fix
                    else PREFIX_CACHE_FIX.get(kind, "turn on prefix caching"),
                    required=token_level,
                )
            )
        if verdict is not None and report.hybrid is not None:
            report.align_probe = {
                "tokens": n,
                "cached": cached,
                "block": report.hybrid.attention_block or 0,
            }
            report.checks.append(
                Check(
                    ALIGN_CHECK,
                    verdict.ok,
                    verdict.detail,
                    verdict.fix,
                    required=verdict.ok is not None,
                )
            )
    finally:
        await adapter.close()
