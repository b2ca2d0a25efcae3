from __future__ import annotations

import itertools

import numpy as np
import pytest

from replay.traces.model import Trace, Trajectory
from replay.workload import Assignment, Spawn, Workload, WorkloadConfig, WorkloadError


def _traj(
    tid: str,
    n: int,
    *,
    subs: tuple[Trajectory, ...] = (),
    think: float = np.nan,
    parent: str | None = None,
    spawn_t: float = 0.0,
    spawn_index: int = 0,
) -> Trajectory:
    t = np.arange(n, dtype=np.float64) * 100.0
    nan = np.full(n, np.nan)
    return Trajectory(
        id=tid,
        block_size=64,
        hash_scope="local",
        namespace=tid.split("/")[0],
        t=t,
        input_tokens=np.full(n, 1000, np.int64),
        output_tokens=np.full(n, 10, np.int64),
        api_time=np.full(n, 20.0),
        think_time=np.full(n, think),
        ttft=nan,
        request_type=np.zeros(n, np.int8),
        stop=np.zeros(n, np.int8),
        hash_offsets=np.zeros(n + 1, np.int64),
        hash_ids=np.zeros(0, np.int64),
        subagents=subs,
        parent_id=parent,
        spawn_t=spawn_t,
        spawn_index=spawn_index,
    )


def _trace(k: int = 5, n: int = 8) -> Trace:
    return Trace([_traj(f"t{i}", n) for i in range(k)], source="mem", format="weka", block_size=64)


def test_same_seed_same_assignment_and_distinct_starts() -> None:
    cfg = WorkloadConfig(sessions=3, seed=7)
    a = Workload(_trace(), cfg)
    b = Workload(_trace(), cfg)
    for slot in range(3):
        xs = list(itertools.islice(a.session_assignments(slot), 6))
        ys = list(itertools.islice(b.session_assignments(slot), 6))
        assert [(x.trajectory.id, x.start) for x in xs] == [(y.trajectory.id, y.start) for y in ys]
    # concurrent sessions start on distinct trajectories when there are enough of them
    first = {a.assignment(s, 0).trajectory.id for s in range(3)}
    assert len(first) == 3
    # another seed gives another assignment
    c = Workload(_trace(), WorkloadConfig(sessions=3, seed=8))
    assert [c.assignment(s, j).trajectory.id for s in range(3) for j in range(4)] != [
        a.assignment(s, j).trajectory.id for s in range(3) for j in range(4)
    ]


def test_every_trajectory_used_once_per_epoch() -> None:
    w = Workload(_trace(k=6), WorkloadConfig(sessions=2, seed=1))
    ids = [w.assignment(s, j).trajectory.id for j in range(3) for s in range(2)]
    assert sorted(ids) == sorted(f"t{i}" for i in range(6))


def test_start_between_quartiles_and_priming_turn() -> None:
    w = Workload(_trace(k=3, n=100), WorkloadConfig(sessions=4, seed=3))
    for s in range(4):
        for a in itertools.islice(w.session_assignments(s), 10):
            assert 25 <= a.start <= 75
            turns = a.turns()
            assert turns[0].priming and turns[0].index == a.start - 1 and turns[0].gap_s == 0
            assert [t.index for t in turns[1:]] == list(range(a.start, 100))
            assert not any(t.priming for t in turns[1:])


def test_gaps_recorded_and_capped() -> None:
    tr = _traj("x", 4)  # t every 100 s, api 20 s -> gap 80 s
    a = Assignment(0, 0, tr, 0, gap_cap_s=50.0)
    assert [t.gap_s for t in a.turns()] == [0.0, 50.0, 50.0, 50.0]
    tr2 = _traj("y", 3, think=400.0)
    assert [t.gap_s for t in Assignment(0, 0, tr2, 0).turns()] == [0.0, 300.0, 300.0]


def test_spawns_follow_parent_turns() -> None:
    sub_early = _traj(
        "p/a", 2, parent="p", spawn_t=150.0, spawn_index=2
    )  # after request 1 (ends 120)
    sub_late = _traj("p/b", 2, parent="p", spawn_t=650.0, spawn_index=7)
    parent = _traj("p", 8, subs=(sub_early, sub_late))
    a = Assignment(0, 0, parent, 0)
    sp = a.spawns()
    assert [(s.after_turn, s.delay_s, s.trajectory.id) for s in sp] == [
        (1, 30.0, "p/a"),
        (6, 30.0, "p/b"),
    ]
    assert a.child(sp[0]).turns()[0].index == 0
    # starting at request 4 (priming 3): only the late subagent is replayed
    assert [s.trajectory.id for s in Assignment(0, 0, parent, 4).spawns()] == ["p/b"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sessions": 0}, "sessions must be at least 1"),
        ({"sessions": 1, "window": (10.0, 5.0)}, "window 10-5 s"),
        ({"sessions": 1, "duration_s": 60.0, "window": (0.0, 120.0)}, "≤ duration"),
        ({"sessions": 1, "start_lo": 0.8, "start_hi": 0.2}, "start range"),
        ({"sessions": 1, "gap_cap_s": -1.0}, "gap cap"),
        ({"sessions": 1, "duration_s": 60.0, "window": (0.0, 60.0), "warmup_s": 90.0}, "warm-up"),
    ],
)
def test_bad_settings_name_the_setting(kwargs: dict, message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        WorkloadConfig(**kwargs)


def test_empty_trace_is_refused() -> None:
    with pytest.raises(WorkloadError, match="no trajectory"):
        Workload(
            Trace([], source="empty.jsonl", format="weka", block_size=64),
            WorkloadConfig(sessions=1),
        )


def test_reuse_counts_epochs_and_gives_each_replay_its_own_identity() -> None:
    """Three trajectories, five sessions: slots 3 and 4 replay a trajectory a second time;
    that replay is its own conversation (another identity), its subagents share it."""
    w = Workload(_trace(k=3), WorkloadConfig(sessions=5, seed=1))
    first = [w.assignment(s, 0) for s in range(5)]
    assert [a.reuse for a in first] == [0, 0, 0, 1, 1]
    assert {a.identity for a in first[:3]} == {a.trajectory.namespace for a in first[:3]}
    again = first[3]
    original = next(a for a in first[:3] if a.trajectory is again.trajectory)
    assert again.identity != original.identity
    assert again.identity.startswith(again.trajectory.namespace)
    assert w.assignment(0, 1).reuse == 1 and w.assignment(0, 2).reuse == 3
    sub = _traj("t0/s", 2, parent="t0", spawn_index=1)
    child = Assignment(0, 0, _traj("t0", 4, subs=(sub,)), 0, reuse=2).child(Spawn(0, 0.0, sub))
    assert child.reuse == 2 and child.identity == "t0#replay2"
    assert w.reuses(3) == 0 and w.reuses(7) == 4


def test_subagent_modes_skip_drops_spawns_and_children_inherit_the_mode() -> None:
    sub = _traj("p/a", 2, parent="p", spawn_t=150.0, spawn_index=2)
    parent = _traj("p", 8, subs=(sub,))
    assert len(Assignment(0, 0, parent, 0).spawns()) == 1
    assert Assignment(0, 0, parent, 0, subagents="skip").spawns() == []
    inline = Assignment(0, 0, parent, 0, subagents="inline")
    assert inline.child(inline.spawns()[0]).subagents == "inline"
    tr = Trace([parent], source="mem", format="weka", block_size=64)
    w = Workload(tr, WorkloadConfig(sessions=1, subagents="skip"))
    assert w.assignment(0, 0).subagents == "skip"


def test_unknown_subagent_mode_is_refused_with_the_choices() -> None:
    with pytest.raises(WorkloadError, match="subagents must be one of concurrent, inline, skip"):
        WorkloadConfig(sessions=1, subagents="parallel")  # type: ignore[arg-type]


def test_warm_up_spreads_the_first_priming_requests() -> None:
    """Session s sends its first (priming) request s·warmup/sessions after the start; later
    assignments start as soon as the previous one ends."""
    w = Workload(_trace(8, 12), WorkloadConfig(sessions=4, warmup_s=120.0))
    for slot in range(4):
        first = w.assignment(slot, 0).turns()[0]
        assert first.gap_s == pytest.approx(slot * 30.0)
        assert first.priming == (w.assignment(slot, 0).start > 0)
        assert w.assignment(slot, 1).turns()[0].gap_s == 0.0
    plain = Workload(_trace(8, 12), WorkloadConfig(sessions=4))
    assert all(plain.assignment(s, 0).turns()[0].gap_s == 0.0 for s in range(4))
