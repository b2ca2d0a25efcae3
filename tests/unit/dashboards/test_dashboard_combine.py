"""Runs of the same workload by different engines (one directory per policy, as `replay
simulate` writes them) shown side by side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from analysis.runs import load_run
from dashboards.combine import combine, companions, workload_key
from replay.rundir_models import Manifest


def _per_policy(root: Path, synth: dict[str, Any], seed: int = 3) -> None:
    for engine in ("flashstate", "vllm", "sglang"):
        synth["write_synthetic_run"](
            root / "sweep" / f"{engine}-s3-seed{seed}", engines=(engine,), seed=seed, sessions=3
        )


def test_companions_share_the_workload_not_the_engines(tmp_path: Path, synth: dict) -> None:
    _per_policy(tmp_path, synth)
    synth["write_synthetic_run"](
        tmp_path / "sweep" / "vllm-s3-seed4", engines=("vllm",), seed=4, sessions=3
    )
    synth["write_synthetic_run"](tmp_path / "elsewhere", engines=("sglang",), seed=3, sessions=3)
    names = sorted(
        p.parent.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("manifest.json")
    )
    found = companions(tmp_path, "sweep/flashstate-s3-seed3", names)
    # Same folder, same seed, sessions, trace and window; another seed or folder is not.
    assert found == ["sweep/sglang-s3-seed3", "sweep/vllm-s3-seed3"]
    assert companions(tmp_path, "sweep/vllm-s3-seed4", names) == []


def test_no_companions_without_a_trace_checksum(tmp_path: Path, synth: dict) -> None:
    _per_policy(tmp_path, synth)
    manifest = tmp_path / "sweep" / "vllm-s3-seed3" / "manifest.json"
    data = json.loads(manifest.read_text())
    del data["trace"]
    manifest.write_text(json.dumps(data))
    assert workload_key(Manifest.model_validate(data)) is None
    names = ["sweep/flashstate-s3-seed3", "sweep/sglang-s3-seed3", "sweep/vllm-s3-seed3"]
    assert companions(tmp_path, "sweep/vllm-s3-seed3", names) == []
    assert companions(tmp_path, "sweep/flashstate-s3-seed3", names) == ["sweep/sglang-s3-seed3"]


def test_combine_stacks_engines(tmp_path: Path, synth: dict) -> None:
    _per_policy(tmp_path, synth)
    runs = [load_run(tmp_path / "sweep" / f"{e}-s3-seed3") for e in ("flashstate", "vllm")]
    both = combine(runs)
    assert both.engines == ["flashstate", "vllm"]
    assert len(both.requests) == sum(len(r.requests) for r in runs)
    assert both.run_id == "flashstate-s3-seed3 + vllm-s3-seed3"
    assert both.manifest.dashboard_members == [str(r.path) for r in runs]
    assert both.engine_info("vllm").gpus == 2
    assert combine(runs[:1]) is runs[0]


def _page(module: str, root: str) -> None:
    import importlib
    from pathlib import Path

    importlib.import_module(f"dashboards.views.{module}").render(Path(root))


@pytest.mark.usefixtures("fresh_cache")
@pytest.mark.parametrize("page", ["replay", "pricing_whatif", "sessions"])
def test_pages_show_per_policy_runs_side_by_side(tmp_path: Path, synth: dict, page: str) -> None:
    _per_policy(tmp_path, synth)
    at = AppTest.from_function(_page, args=(page, str(tmp_path)), default_timeout=60)
    at.query_params["run"] = "sweep/flashstate-s3-seed3"
    at.run()
    assert not at.exception and not at.error
    assert at.multiselect[0].value == ["sweep/sglang-s3-seed3", "sweep/vllm-s3-seed3"]
    if page == "replay":
        assert [s.value for s in at.subheader] == ["flashstate", "sglang", "vllm"]
        at.multiselect[0].set_value(["sweep/vllm-s3-seed3"]).run()
        assert [s.value for s in at.subheader] == ["flashstate", "vllm"]
    elif page == "pricing_whatif":
        assert list(at.dataframe[0].value["engine"]) == ["flashstate", "sglang", "vllm"]
    else:
        assert at.selectbox(key="sessions_engine").options == ["flashstate", "sglang", "vllm"]
