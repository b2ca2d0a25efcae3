"""Emulator replicas: several servers per engine (`start_fleet`), each answering every request
with its own `x-replay-replica` header; a lone server sends none; the replica index travels to
a child process as `--replica`; bad replica counts are refused by name."""

from __future__ import annotations

import json
import urllib.request

import pytest
from pydantic import ValidationError

from replay.emulator.config import EmulatorConfig, from_child_args
from replay.emulator.launch import emulator_configs, replica_configs, server_name, start_fleet
from replay.emulator.server import REPLICA_HEADER, running_server


def _complete(url: str) -> tuple[str | None, dict[str, object]]:
    models = json.load(urllib.request.urlopen(url + "/v1/models", timeout=10))
    body = {"model": models["data"][0]["id"], "prompt": " kabodu tavena", "max_tokens": 2}
    req = urllib.request.Request(
        url + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers.get(REPLICA_HEADER), json.load(resp)


def test_a_fleet_of_child_replicas_names_each_replica_in_its_answers() -> None:
    with start_fleet(["vllm", "sglang"], 3, time_scale=100.0, blocks=200) as group:
        fleet = group.fleet
        assert sorted(fleet) == ["sglang", "vllm"]
        assert all(len(urls) == 3 and len(set(urls)) == 3 for urls in fleet.values())
        assert sorted(group.urls) == [f"{e}.{i}" for e in ("sglang", "vllm") for i in range(3)]
        for urls in fleet.values():
            for index, url in enumerate(urls):
                header, body = _complete(url)
                assert header == str(index)
                assert body["choices"]


async def test_a_lone_server_sends_no_replica_header() -> None:
    async with running_server(EmulatorConfig(engine="vllm", port=0, time_scale=100.0)) as (url, _):
        import asyncio

        header, _body = await asyncio.to_thread(_complete, url)
        assert header is None


def test_replica_settings_round_trip_and_bad_counts_are_named() -> None:
    cfg = EmulatorConfig(engine="vllm", port=8123)
    reps = replica_configs(cfg, 2)
    assert [r.replica for r in reps] == [0, 1] and {r.port for r in reps} == {0}
    assert [from_child_args(c.child_args()) for c in (*reps, cfg)] == [*reps, cfg]
    assert [server_name(r) for r in reps] == ["vllm.0", "vllm.1"] and server_name(cfg) == "vllm"
    assert [c.replica for c in emulator_configs(["vllm"])] == [None]
    assert [c.replica for c in emulator_configs(["vllm"], replicas=2)] == [0, 1]
    with pytest.raises(ValueError, match="replicas must be at least 1, got 0"):
        replica_configs(cfg, 0)
    with pytest.raises(ValueError, match="replicas must be at least 1, got 0"):
        emulator_configs(["vllm"], replicas=0)
    with pytest.raises(ValidationError, match="replica"):
        EmulatorConfig(engine="vllm", replica=-1)


def test_a_bad_replica_flag_is_named() -> None:
    from replay.emulator.cli import build_config

    said: list[str] = []

    def fail(message: str) -> None:
        said.append(message)
        raise SystemExit(2)

    with pytest.raises(SystemExit):
        build_config(
            "vllm", "glm-5.3-flash", "127.0.0.1", 0, 1.0, None, None, None, None, None, 64,
            {}, fail=fail, replica=-1,  # type: ignore[arg-type]
        )  # fmt: skip
    assert said and said[0].startswith("--replica: ") and "greater than or equal to 0" in said[0]
