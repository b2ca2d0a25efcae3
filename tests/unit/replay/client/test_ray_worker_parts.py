"""A Ray worker writes its part file on its own machine and the run pulls the lines
(`replay.client.ray_workers`): the actor's side, without Ray (the Ray run itself is
test_client_workers.py's `test_workers_on_a_local_ray_cluster`)."""

from __future__ import annotations

from pathlib import Path

from replay.client.ray_workers import WORKER_TMP_PREFIX, _Worker
from replay.client.workers import PARTS, STOP, WorkerSpec, part_path


def _spec(run_dir: Path) -> WorkerSpec:
    # Only the index and the run directory matter to the actor before `run`.
    return WorkerSpec(
        index=1, workers=2, engines=[], trace=None, workload=None, salt=0,  # type: ignore[arg-type]
        run_dir=str(run_dir), t0_ns=0, epoch_ns=0, end_epoch_ns=0, host="elsewhere",
        policy=None, limits=None,  # type: ignore[arg-type]
    )  # fmt: skip


def test_the_actor_writes_in_a_folder_of_its_own_and_hands_on_whole_lines(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    w = _Worker(_spec(run_dir))
    folder = Path(w.spec.run_dir)
    assert folder.name.startswith(WORKER_TMP_PREFIX) and not folder.is_relative_to(run_dir)
    assert w.where() == str(part_path(folder, 1))
    assert w.drain() == b""  # nothing written yet
    part = Path(w.where())
    part.parent.mkdir(parents=True)
    part.write_bytes(b'{"seq": 0}\n{"seq": 1')  # the second line not yet whole
    assert w.drain() == b'{"seq": 0}\n'
    assert w.drain() == b""
    with part.open("ab") as f:
        f.write(b'}\n{"seq": 2}\n')
    assert w.drain() == b'{"seq": 1}\n{"seq": 2}\n'
    w.stop()  # the run's STOP, passed on to the worker's own folder
    assert (folder / PARTS / STOP).exists()
    assert not run_dir.exists()  # the actor never wrote to the run directory
    w.close()
    assert not folder.exists()
