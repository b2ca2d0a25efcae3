"""`replay.server_info`: the emulator's `/get_server_info` as one model, parsed strictly by the
client; a real server's info is not ours and is left as it is."""

from __future__ import annotations

import pytest

from replay.emulator.config import EmulatorConfig, make_cache
from replay.emulator.server import EmulatorServer
from replay.engines.preflight import PreflightReport, _read_server_info
from replay.server_info import ServerInfo, ServerInfoError, parse_server_info


def _info(engine: str, **kw: object) -> ServerInfo:
    cfg = EmulatorConfig.model_validate({"engine": engine, "port": 0, **kw})
    return EmulatorServer(cfg, make_cache).server_info()


@pytest.mark.parametrize("engine", ["vllm", "flashstate", "sglang"])
def test_every_emulator_answers_the_model_and_it_parses_back(engine: str) -> None:
    info = _info(engine, token_scale=16.0)
    wire = info.model_dump()
    assert parse_server_info(wire) == info
    model = info.engine_model
    assert model.capacity_source == "profile" and model.requested_capacity_blocks is None
    assert model.capacity_blocks is not None and "blocks_per_engine (2531)" in model.capacity_reason
    assert (model.state_slots is not None) == (engine == "sglang")
    flat = info.flat()
    assert flat["engine_model"]["capacity_blocks"] == model.capacity_blocks
    assert "cache_blocks" not in flat and "replica" not in flat  # a lone server


def test_an_unbounded_policy_publishes_no_block_count() -> None:
    info = _info("vllm", policy="ideal", blocks=900)
    model = info.engine_model
    assert model.capacity_blocks is None and model.capacity_source == "unbounded"
    assert model.requested_capacity_blocks == 900
    assert parse_server_info(info.model_dump()) == info


def test_real_servers_are_not_ours() -> None:
    sglang_like = {"version": "0.5.22", "model_path": "x", "max_total_num_tokens": 100}
    assert parse_server_info(sglang_like) is None
    assert parse_server_info({"emulator": "yes"}) is None
    assert parse_server_info([1, 2]) is None


def test_ours_malformed_names_the_field() -> None:
    wire = _info("vllm").model_dump()
    wire["engine_model"]["capacity_blocks"] = "many"
    with pytest.raises(ServerInfoError, match=r"field engine_model.capacity_blocks: "):
        parse_server_info(wire)
    wire = _info("vllm").model_dump() | {"cache_blocks": 3}
    with pytest.raises(ServerInfoError, match=r"field cache_blocks: Extra inputs"):
        parse_server_info(wire)


def _report() -> PreflightReport:
    return PreflightReport(url="http://127.0.0.1:1", kind="vllm", model=None)


def test_preflight_keeps_ours_typed_and_theirs_as_they_came() -> None:
    rep = _report()
    info = _info("sglang")
    _read_server_info(rep, info.model_dump())
    assert rep.emulator == info and rep.checks == []
    assert rep.server_info["engine_model"]["state_slots"] == info.engine_model.state_slots
    assert rep.as_dict()["emulator"]["engine"] == "sglang"
    theirs = _report()
    _read_server_info(theirs, {"version": "0.5.22", "max_total_num_tokens": 9, "nested": {}})
    assert theirs.emulator is None and theirs.server_info == {
        "version": "0.5.22",
        "max_total_num_tokens": 9,
    }


def test_preflight_warns_of_an_emulator_of_another_shape() -> None:
    rep = _report()
    _read_server_info(rep, {"emulator": True, "time_scale": 30.0})
    assert rep.emulator is None and rep.server_info == {"emulator": True, "time_scale": 30.0}
    (check,) = rep.checks
    assert check.name == "server info" and check.ok is False and not check.required
    assert "field version: Field required" in check.detail and rep.ok
