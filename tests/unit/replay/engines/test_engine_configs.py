"""Engine configs: every bundled one parses and renders its exact command; the paper's systems
carry the flags the comparison depends on; every malformed config names the file and field;
and `replay engines list|show|launch --dry-run` print what the configs say."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import shlex
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from replay.cli import app
from replay.engines.configs import (
    EngineConfigError,
    config_names,
    load_all_engine_configs,
    load_engine_config,
    render_command,
)

ENGINES = Path(__file__).resolve().parents[4] / "configs" / "engines"
PAPER = ["flashstate-glm53-b200", "vllm-glm53-b200", "sglang-glm53-b200"]
REQUIRED = [
    *PAPER,
    "sglang-glm53-b200-hicache",
    "vllm-lmcache-glm53-b200",
    "vllm-cpu-tiny",
]


def flag_values(argv: tuple[str, ...] | list[str]) -> dict[str, list[str]]:
    """`--flag v1 v2` → {"--flag": ["v1", "v2"]} (a bare flag maps to [])."""
    out: dict[str, list[str]] = {}
    key = None
    for a in argv:
        if a.startswith("--"):
            key = a
            out[key] = []
        elif key is not None:
            out[key].append(a)
    return out


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["engines", *args])


# ---- the bundled configs -------------------------------------------------------------------


def test_every_required_config_is_bundled() -> None:
    assert set(REQUIRED) <= set(config_names(ENGINES))


@pytest.mark.parametrize("name", config_names(ENGINES))
def test_every_config_parses_and_renders_its_command(name: str) -> None:
    cfg = load_engine_config(name, ENGINES)
    cmd = render_command(cfg, port=9123)
    module = {"sglang": "sglang.launch_server"}.get(cfg.kind, "vllm.entrypoints.openai.api_server")
    assert cmd.argv[1:3] == ("-m", module)
    flags = flag_values(cmd.argv)
    model_flag = "--model-path" if cfg.kind == "sglang" else "--model"
    tp_flag = "--tp-size" if cfg.kind == "sglang" else "--tensor-parallel-size"
    assert flags[model_flag] == [cfg.resolved_model()]
    assert flags["--port"] == ["9123"]
    assert flags["--host"] == [cfg.serve.host]
    assert flags[tp_flag] == [str(cfg.hardware.tensor_parallel_size)]
    # Every configured flag appears, in order, after the structured ones.
    assert list(cmd.argv[-len(cfg.serve.args) :]) == cfg.serve.args
    # The shell rendering is the same command: env assignments, then the argv word for word.
    words = shlex.split(cmd.shell().replace("\\\n", " "))
    env = [f"{k}={v}" for k, v in cmd.env.items()]
    assert words == [*env, *cmd.argv]


def test_flashstate_config_carries_the_release_flags() -> None:
    cfg = load_engine_config("flashstate-glm53-b200", ENGINES)
    flags = flag_values(render_command(cfg).argv)
    assert cfg.kind == "flashstate" and cfg.engine == "flashstate" and cfg.adapter == "vllm"
    assert flags["--mamba-frontier-checkpoint"] == []
    assert flags["--mamba-prefill-export"] == []
    assert flags["--prefix-cache-eviction"] == ["gds"]
    assert flags["--prefill-cost-coefficients"] == ["1.862e-5", "3.33e-6"]
    assert flags["--prefix-cache-leaf-last"] == []
    assert flags["--prefix-cache-leaf-idle-seconds"] == ["60"]
    assert flags["--enable-prefix-caching"] == []
    assert flags["--enable-prompt-tokens-details"] == []
    assert flags["--long-prefill-token-threshold"] == ["8704"]
    assert flags["--tensor-parallel-size"] == ["2"]
    assert (cfg.hardware.gpus, cfg.hardware.gpu_type) == (2, "B200")
    src = cfg.source
    assert src.type == "git"
    assert (src.repo, src.commit) == ("FutureMLS-Lab/FlashStates", "e2ea9a7")
    [fork] = src.submodules
    assert (fork.repo, fork.branch, fork.commit) == ("FutureMLS-Lab/vllm", "flashstate", "3cfd432")
    assert cfg.expect.block_size == 4352


def test_vllm_baseline_matches_flashstate_except_the_hybrid_state_flags() -> None:
    # The paper's comparison: same cache budget, batch size and chunk size, so the two differ
    # only in hybrid state management.
    fs = flag_values(load_engine_config("flashstate-glm53-b200", ENGINES).serve.args)
    vl = flag_values(load_engine_config("vllm-glm53-b200", ENGINES).serve.args)
    fork_only = {
        "--mamba-frontier-checkpoint",
        "--mamba-prefill-export",
        "--prefix-cache-eviction",
        "--prefill-cost-coefficients",
        "--prefix-cache-leaf-last",
        "--prefix-cache-leaf-idle-seconds",
    }
    assert fork_only.isdisjoint(vl)
    assert {k: v for k, v in fs.items() if k not in fork_only} == vl
    for shared in ("--kv-cache-memory-bytes", "--max-num-seqs", "--long-prefill-token-threshold"):
        assert shared in vl


def test_sglang_configs_report_cache_and_hicache_adds_the_host_tier() -> None:
    base = load_engine_config("sglang-glm53-b200", ENGINES)
    hi = load_engine_config("sglang-glm53-b200-hicache", ENGINES)
    b, h = flag_values(render_command(base).argv), flag_values(render_command(hi).argv)
    assert "--enable-cache-report" in b and "--enable-cache-report" in h
    assert "--enable-hierarchical-cache" not in b
    # Identical apart from the HiCache flags (and the default port).
    assert {k: v for k, v in h.items() if k not in b} == {
        "--enable-hierarchical-cache": [],
        "--hicache-size": ["256"],
        "--hicache-write-policy": ["write_through"],
    }
    assert {k: h[k] for k in b if k != "--port"} == {k: v for k, v in b.items() if k != "--port"}
    assert (base.adapter, hi.adapter) == ("sglang", "sglang")
    assert hi.endpoint_arg("http://h:1") == "--endpoint sglang-hicache=sglang@http://h:1"


def test_lmcache_config_connects_lmcache_through_kv_transfer_config() -> None:
    cfg = load_engine_config("vllm-lmcache-glm53-b200", ENGINES)
    cmd = render_command(cfg)
    ktc = json.loads(flag_values(cmd.argv)["--kv-transfer-config"][0])
    assert ktc == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
    assert cmd.env["LMCACHE_LOCAL_CPU"] == "True"
    # The engine name is not a kind, so the endpoint line names the kind.
    assert cfg.endpoint_arg("http://h:1") == "--endpoint vllm-lmcache=vllm@http://h:1"


def test_cpu_tiny_config_is_the_recipe() -> None:
    cfg = load_engine_config("vllm-cpu-tiny", ENGINES)
    cmd = render_command(cfg)
    flags = flag_values(cmd.argv)
    for f in (
        "--skip-tokenizer-init",
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",
    ):
        assert flags[f] == []
    assert flags["--load-format"] == ["dummy"]
    assert flags["--max-model-len"] == ["16384"]
    # dev mode serves /reset_prefix_cache, which `replay run --reset-cache` calls (issue 35)
    assert cmd.env == {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_SERVER_DEV_MODE": "1"}
    assert cmd.argv[0].endswith(".venv-vllm/bin/python") and Path(cmd.argv[0]).is_absolute()
    model = json.loads((Path(cfg.resolved_model()) / "config.json").read_text())
    assert model["architectures"] == ["LlamaForCausalLM"]
    got = [model[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads")]
    assert got == [256, 512, 4]
    assert (model["num_key_value_heads"], model["head_dim"], model["num_hidden_layers"]) == (
        2,
        64,
        2,
    )
    assert model["vocab_size"] == 32000
    assert cfg.hardware.gpus == 0 and cfg.endpoint_arg("http://x:1") == "--endpoint vllm=http://x:1"


def test_overrides_port_python_host_and_model() -> None:
    cfg = load_engine_config("vllm-glm53-b200", ENGINES).with_model("my-org/my-model")
    cmd = render_command(cfg, port=7000, python="/opt/py/bin/python", host="0.0.0.0")
    flags = flag_values(cmd.argv)
    assert cmd.argv[0] == "/opt/py/bin/python"
    assert (flags["--port"], flags["--host"], flags["--model"]) == (
        ["7000"],
        ["0.0.0.0"],
        ["my-org/my-model"],
    )


def test_relative_env_values_resolve_against_the_yaml_folder(tmp_path: Path, monkeypatch) -> None:
    data = _good()
    data["serve"]["env"] = {
        "PYTHONPATH": "./patch",
        "UP": "../lib/x",
        "PLAIN": "2",
        "ABS": "/opt/p",
        "DOT": ".hidden",
    }
    (tmp_path / "configs").mkdir()
    path = _write(tmp_path / "configs", data, "env-paths")
    monkeypatch.chdir("/")  # the launcher's working directory does not matter
    env = render_command(load_engine_config(str(path))).env
    assert env == {
        "PYTHONPATH": str(tmp_path / "configs" / "patch"),
        "UP": str(tmp_path / "lib" / "x"),
        "PLAIN": "2",
        "ABS": "/opt/p",
        "DOT": ".hidden",
    }


def _load_mamba2_patch(folder: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, folder / "sitecustomize.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cpu_mamba2_config_puts_its_patch_on_pythonpath(monkeypatch) -> None:
    cfg = load_engine_config("vllm-cpu-mamba2", ENGINES)
    cmd = render_command(cfg)
    flags = flag_values(cmd.argv)
    assert flags["--mamba-cache-mode"] == ["align"]
    assert flags["--block-size"] == ["384"] and cfg.expect.block_size == 384
    model = json.loads((Path(cfg.resolved_model()) / "config.json").read_text())
    assert model["architectures"] == ["NemotronHForCausalLM"] and model["head_dim"] == 64
    folder = Path(cmd.env["PYTHONPATH"])
    assert folder.is_absolute() and (folder / "sitecustomize.py").is_file()

    # Loading it installs one import hook and imports no vLLM.
    hooks = list(sys.meta_path)
    monkeypatch.setattr(sys, "meta_path", hooks)
    before = set(sys.modules)
    patch = _load_mamba2_patch(folder, "mamba2_patch_under_test")
    assert [type(f).__name__ for f in hooks].count("_Hook") == 1
    assert not [m for m in set(sys.modules) - before if m.split(".")[0] == "vllm"]

    # On a stand-in mixer the wrapped method drops the in-prefill checkpoint, on the CPU only.
    @dataclasses.dataclass(frozen=True)
    class Spec:
        block_size: int
        num_prefill_checkpoint_blocks: int = 0
        prefill_checkpoint_alignment: int | None = None

    class MambaMixer2:
        def get_kv_cache_spec(self, vllm_config: object) -> Spec:
            return Spec(384, num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1)

    mixer = types.ModuleType("fake_mixer")
    mixer.MambaMixer2 = MambaMixer2  # type: ignore[attr-defined]
    patch._patch(mixer)
    wrapped = MambaMixer2.get_kv_cache_spec
    patch._patch(mixer)
    assert MambaMixer2.get_kv_cache_spec is wrapped  # a second call does not wrap twice
    monkeypatch.setattr(patch, "_on_cpu", lambda: False)
    assert MambaMixer2().get_kv_cache_spec(None) == Spec(384, 1, 1)  # not on the CPU: as is
    monkeypatch.setattr(patch, "_on_cpu", lambda: True)
    assert MambaMixer2().get_kv_cache_spec(None) == Spec(384, 0, None)
    patch._patch(types.ModuleType("no_mixer"))  # nothing to patch: no error


# ---- malformed configs name the file and the field ---------------------------------------


def _good() -> dict[str, Any]:
    data = yaml.safe_load((ENGINES / "vllm-glm53-b200.yaml").read_text())
    assert isinstance(data, dict)
    return data


def _write(tmp_path: Path, data: Any, name: str = "bad-engine") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def _error(path: Path) -> str:
    with pytest.raises(EngineConfigError) as e:
        load_engine_config(str(path))
    return str(e.value)


def test_wrong_type_names_file_and_field(tmp_path: Path) -> None:
    data = _good()
    data["serve"]["port"] = "eighty"
    msg = _error(_write(tmp_path, data))
    assert str(tmp_path / "bad-engine.yaml") in msg and "field 'serve.port'" in msg


def test_unknown_field_is_rejected_by_name(tmp_path: Path) -> None:
    data = _good()
    data["hardware"]["gpu_count"] = 2
    msg = _error(_write(tmp_path, data))
    assert "field 'hardware.gpu_count'" in msg and "Extra inputs are not permitted" in msg


def test_missing_field_and_bad_kind(tmp_path: Path) -> None:
    data = _good()
    del data["kind"]
    assert "field 'kind': Field required" in _error(_write(tmp_path, data))
    data = _good()
    data["kind"] = "tensorrt"
    assert "field 'kind'" in _error(_write(tmp_path, data, "bad-kind"))


def test_bad_git_pin_names_the_source_field(tmp_path: Path) -> None:
    data = _good()
    data["source"]["commit"] = "main"
    assert "field 'source.git.commit'" in _error(_write(tmp_path, data))


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "kind: vllm\nserve:\n  args: [--a\n  port: 1\n")
    msg = _error(path)
    assert str(path) in msg and "invalid YAML at line" in msg


def test_flags_the_structured_fields_own_are_rejected(tmp_path: Path) -> None:
    data = _good()
    data["serve"]["args"] += ["--tensor-parallel-size", "4"]
    msg = _error(_write(tmp_path, data))
    assert "serve.args repeats --tensor-parallel-size" in msg
    assert "hardware.tensor_parallel_size" in msg


def test_expectation_without_its_flag_names_the_flag(tmp_path: Path) -> None:
    data = _good()
    data["serve"]["args"].remove("--enable-prompt-tokens-details")
    msg = _error(_write(tmp_path, data))
    assert "expect.cached_tokens_reported" in msg and "--enable-prompt-tokens-details" in msg
    data["kind"] = "sglang"
    data["serve"]["args"] = []
    assert "--enable-cache-report" in _error(_write(tmp_path, data, "bad-sglang"))


def test_tensor_parallel_beyond_the_gpus_is_rejected(tmp_path: Path) -> None:
    data = _good()
    data["hardware"]["tensor_parallel_size"] = 4
    msg = _error(_write(tmp_path, data))
    assert "field 'hardware'" in msg and "tensor_parallel_size 4" in msg


def test_name_field_must_match_the_file(tmp_path: Path) -> None:
    data = _good()
    data["name"] = "something-else"
    assert "field 'name' is 'something-else'" in _error(_write(tmp_path, data))


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(EngineConfigError, match=r"no engine config named 'nope'.*vllm-cpu-tiny"):
        load_engine_config("nope", ENGINES)


def test_one_bad_file_does_not_hide_the_good_ones(tmp_path: Path) -> None:
    _write(tmp_path, _good(), "good-one")
    data = _good()
    data["adapter"] = "grpc"
    _write(tmp_path, data, "bad-one")
    good, bad = load_all_engine_configs(tmp_path)
    assert [c.name for c in good] == ["good-one"]
    assert len(bad) == 1 and "bad-one.yaml" in str(bad[0]) and "field 'adapter'" in str(bad[0])


# ---- the commands -------------------------------------------------------------------------


def test_list_shows_every_config() -> None:
    result = invoke("list")
    assert result.exit_code == 0, result.output
    for name in REQUIRED:
        assert name in result.stdout


def test_list_reports_a_malformed_file_and_fails(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "engines").mkdir()
    _write(tmp_path / "engines", _good(), "fine")
    data = _good()
    data["serve"]["port"] = -1
    _write(tmp_path / "engines", data, "broken")
    monkeypatch.setenv("REPLAY_CONFIG_DIR", str(tmp_path))
    result = invoke("list")
    assert result.exit_code == 2
    assert "fine" in result.stdout
    assert "broken.yaml" in result.stderr and "serve.port" in result.stderr


def test_show_prints_the_resolved_command_and_env() -> None:
    result = invoke("show", "vllm-lmcache-glm53-b200")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "LMCACHE_MAX_LOCAL_CPU_SIZE=256" in out
    assert "-m vllm.entrypoints.openai.api_server" in out
    assert "--kv-transfer-config" in out and "github.com/vllm-project/vllm@ec8a372" in out


def test_launch_dry_run_prints_the_command_and_runs_nothing() -> None:
    # A nonexistent interpreter proves nothing was checked or started.
    result = invoke("launch", "flashstate-glm53-b200", "--dry-run", "--port", "8111")
    assert result.exit_code == 0, result.output
    words = shlex.split(result.stdout.replace("\\\n", " "))
    cfg = load_engine_config("flashstate-glm53-b200", ENGINES)
    assert words == list(render_command(cfg, port=8111).argv)


def test_show_and_launch_name_a_malformed_config(tmp_path: Path) -> None:
    data = _good()
    data["expect"]["block_size"] = 0
    path = _write(tmp_path, data)
    for cmd in (["show", str(path)], ["launch", str(path), "--dry-run"]):
        result = invoke(*cmd)
        assert result.exit_code == 2
        assert str(path) in result.stderr and "expect.block_size" in result.stderr


def test_launching_a_gpu_config_without_gpus_fails_fast() -> None:
    # This machine (and CI) has no B200s: the command must say so at once, not hang.
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "replay", "engines", "launch", "flashstate-glm53-b200"],
        capture_output=True,
        text=True,
        timeout=120,
        # No GPU is visible even on a GPU machine: the check must not depend on where CI runs.
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "300", "CUDA_VISIBLE_DEVICES": ""},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "needs 2 × B200 GPU(s)" in done.stderr and "vllm-cpu-tiny" in done.stderr
    assert time.monotonic() - t0 < 60


# ---- the fork's fetch-and-build script ----------------------------------------------------

FETCH = ENGINES.parents[1] / "scripts" / "fetch_flashstate.sh"


def _script_pin(name: str) -> str:
    m = re.search(rf"^{name}=(\S+)$", FETCH.read_text(), re.M)
    assert m is not None, f"{FETCH} sets no {name}"
    return m.group(1)


def test_fetch_script_pins_match_the_flashstate_config() -> None:
    src = load_engine_config("flashstate-glm53-b200", ENGINES).source
    assert src.type == "git"
    [fork] = src.submodules
    assert _script_pin("FLASHSTATES_REPO") == f"https://github.com/{src.repo}.git"
    assert _script_pin("FLASHSTATES_COMMIT") == src.commit
    assert (_script_pin("FORK_REPO"), _script_pin("FORK_COMMIT")) == (fork.repo, fork.commit)
    assert _script_pin("FORK_BRANCH") == fork.branch
    assert _script_pin("VENV") == ".venv-flashstate"
    assert load_engine_config("flashstate-glm53-b200", ENGINES).serve.python == (
        ".venv-flashstate/bin/python"
    )


def test_fetch_script_dry_run_prints_every_step_and_runs_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "FlashStates"
    done = subprocess.run(
        ["bash", str(FETCH), "--dry-run", "--dest", str(dest), "--venv", str(tmp_path / "venv")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("+ ")]
    expected = [
        f"+ git clone https://github.com/FutureMLS-Lab/FlashStates.git {dest}",
        f"+ git -C {dest} checkout --quiet --detach e2ea9a7",
        f"+ git -C {dest} submodule update --init --recursive",
        f"+ git -C {dest}/vllm checkout --quiet --detach 3cfd432",
        f"+ {tmp_path}/venv/bin/python -m pip install -e {dest}/vllm",
    ]
    for want in expected:
        assert want in lines, f"missing step {want!r} in:\n{done.stdout}"
    assert lines.index(expected[0]) < lines.index(expected[2]) < lines.index(expected[4])
    assert "--prefix-cache-leaf-idle-seconds" in done.stdout  # the flag check is listed
    assert "nothing was run" in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_fetch_script_rejects_an_unknown_argument() -> None:
    done = subprocess.run(["bash", str(FETCH), "--frobnicate"], capture_output=True, text=True)
    assert done.returncode == 2 and "unknown argument '--frobnicate'" in done.stderr


# ---- preflight judged against the config's expectations -----------------------------------


def _report(block_size: int | None, cached_ok: bool) -> Any:
    from replay.engines.preflight import Check, PreflightReport

    checks = [
        Check("reachable", True, "GET /health answered 200."),
        Check("cached-token reporting", cached_ok, "no cached field.", "start with --x"),
        Check("prefix caching", True, "hit."),
    ]
    return PreflightReport("http://h:1", "vllm", "m", checks=checks, block_size=block_size)


def test_judge_passes_a_report_that_meets_the_expectations() -> None:
    from replay.commands.engines import judge

    cfg = load_engine_config("vllm-cpu-tiny", ENGINES)
    assert judge(_report(128, True), cfg) == []


def test_judge_names_a_failed_check_and_a_wrong_block_size() -> None:
    from replay.commands.engines import judge

    cfg = load_engine_config("vllm-cpu-tiny", ENGINES)
    problems = judge(_report(16, False), cfg)
    assert problems[0] == "cached-token reporting failed: no cached field. Fix: start with --x"
    assert "block size: the config expects 128 tokens but /metrics reports 16" in problems[1]
    # Without a config (a bare URL) only the checks count.
    assert len(judge(_report(16, False), None)) == 1


def test_judge_ignores_a_check_the_config_expects_off(tmp_path: Path) -> None:
    from replay.commands.engines import judge

    data = yaml.safe_load((ENGINES / "vllm-cpu-tiny.yaml").read_text())
    data["expect"]["cached_tokens_reported"] = False
    data["model"]["path"] = "some-model"
    cfg = load_engine_config(str(_write(tmp_path, data, "no-report")))
    assert judge(_report(128, False), cfg) == []


# ---- run-config: the engines block for `replay run --config` -------------------------------


def test_run_config_writes_a_file_replay_run_accepts(tmp_path: Path) -> None:
    from replay.client.config import load_config_file

    out = tmp_path / "engines.yaml"
    result = invoke(
        "run-config",
        "flashstate-glm53-b200=http://n1:8001",
        "vllm-glm53-b200=http://n2:8002/",
        "sglang-glm53-b200-hicache=http://n3:8003",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    specs = load_config_file(out).engines
    assert [(s.name, s.kind, s.url) for s in specs] == [
        ("flashstate", "flashstate", "http://n1:8001"),
        ("vllm", "vllm", "http://n2:8002"),
        ("sglang-hicache", "sglang", "http://n3:8003"),
    ]
    assert {(s.gpus, s.gpu_type, s.model) for s in specs} == {(2, "B200", "glm-5.3-flash")}


def test_run_config_rejects_bad_pairs_and_repeated_engines() -> None:
    result = invoke("run-config", "vllm-glm53-b200:http://n2:8002")
    assert result.exit_code == 2 and "expected CONFIG=URL" in result.stderr
    result = invoke("run-config", "vllm-glm53-b200=http://a:1", "vllm-cpu-tiny=http://b:2")
    assert result.exit_code == 2 and "engine names repeat (vllm, vllm)" in result.stderr
    result = invoke("run-config", "no-such-config=http://a:1")
    assert result.exit_code == 2 and "no engine config named 'no-such-config'" in result.stderr


def test_a_binary_or_a_folder_as_engine_yaml_is_named(tmp_path: Path) -> None:
    binary = tmp_path / "bin-engine.yaml"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\xff")
    assert f"engine config {binary}: is a binary file, not YAML text" in _error(binary)
    folder = tmp_path / "dir-engine.yaml"
    folder.mkdir()
    assert f"engine config {folder}: is a folder" in _error(folder)
    latin = tmp_path / "latin-engine.yaml"
    latin.write_bytes("kind: vllm # caf\xe9\n".encode("latin-1"))
    assert "not UTF-8 text" in _error(latin)
    res = CliRunner().invoke(app, ["engines", "show", str(binary)])
    assert res.exit_code == 2 and "is a binary file" in res.output, res.output
