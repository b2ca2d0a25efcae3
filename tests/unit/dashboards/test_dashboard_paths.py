from __future__ import annotations

import os
from pathlib import Path

import pytest

from dashboards.paths import PathRefused, list_runs, open_inside, relative_name, runs_root_from


def test_root_from_argument_env_or_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert runs_root_from([str(tmp_path)], {}) == tmp_path.resolve()
    assert runs_root_from([], {"REPLAY_RUNS_DIR": str(tmp_path)}) == tmp_path.resolve()
    # The script argument wins over the environment (it is what the command line said).
    assert (
        runs_root_from([str(tmp_path / "a")], {"REPLAY_RUNS_DIR": "/elsewhere"})
        == (tmp_path / "a").resolve()
    )
    monkeypatch.chdir(tmp_path)
    assert runs_root_from([" "], {}) == (tmp_path / "runs").resolve()


def test_inside_paths_resolve(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert open_inside(tmp_path, "a/b") == (tmp_path / "a" / "b").resolve()
    assert open_inside(tmp_path, str(tmp_path / "a")) == (tmp_path / "a").resolve()
    assert open_inside(tmp_path, "a/../a/b") == (tmp_path / "a" / "b").resolve()


@pytest.mark.parametrize("bad", ["..", "../other", "/etc", "a/../../x"])
def test_outside_paths_are_refused_with_the_folder_named(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "runs"
    (root / "a").mkdir(parents=True)
    with pytest.raises(PathRefused, match=r"outside the runs folder .*runs.*only run directories"):
        open_inside(root, bad)


def test_symlink_leading_out_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    (tmp_path / "secret").mkdir()
    os.symlink(tmp_path / "secret", root / "link")
    with pytest.raises(PathRefused, match="outside the runs folder"):
        open_inside(root, "link")


def test_empty_and_nul_are_refused(tmp_path: Path) -> None:
    with pytest.raises(PathRefused, match="no run directory given"):
        open_inside(tmp_path, "  ")
    with pytest.raises(PathRefused, match="NUL"):
        open_inside(tmp_path, "a\x00b")


def test_list_runs_relative_names(tmp_path: Path) -> None:
    for name in ("r1", "group/r2"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "manifest.json").write_text("{}")
    (tmp_path / "not-a-run").mkdir()
    assert list_runs(tmp_path) == ["group/r2", "r1"]
    assert list_runs(tmp_path / "missing") == []
    # The folder itself may be a run directory: it is listed as ".".
    assert relative_name(tmp_path / "r1", tmp_path / "r1") == "."
    assert open_inside(tmp_path / "r1", ".") == (tmp_path / "r1").resolve()


def test_a_run_whose_files_link_outside_is_skipped_with_a_note_and_refused(
    tmp_path: Path,
) -> None:
    """Issue 36: the loader followed a run's manifest.json symlinked outside the runs folder."""
    from dashboards.paths import scan_runs

    root = tmp_path / "runs"
    for name in ("ok", "evil", "half"):
        (root / name).mkdir(parents=True)
    (tmp_path / "secret.json").write_text("{}")
    (root / "ok" / "manifest.json").write_text("{}")
    os.symlink(tmp_path / "secret.json", root / "evil" / "manifest.json")
    (root / "half" / "manifest.json").write_text("{}")
    os.symlink(tmp_path / "secret.json", root / "half" / "requests.parquet")
    names, notes = scan_runs(root)
    assert names == ["ok"] and list_runs(root) == ["ok"]
    assert len(notes) == 2
    assert any(
        n.startswith("'evil': its manifest.json links outside the runs folder") for n in notes
    )
    assert any(n.startswith("'half': its requests.parquet links outside") for n in notes)
    for name, file in (("evil", "manifest.json"), ("half", "requests.parquet")):
        with pytest.raises(PathRefused, match=rf"'{name}': its {file} links outside the runs"):
            open_inside(root, name)
    # A link that stays inside the folder is fine.
    os.symlink(root / "ok" / "manifest.json", root / "half" / "summary.json")
    os.remove(root / "half" / "requests.parquet")
    assert open_inside(root, "half") == (root / "half").resolve()
