"""scripts/mooncake_agreement.py refuses bad arguments with one line naming the flag, before it
starts Mooncake, a missing Mooncake environment is one line naming the setup script, and the
oracle's model side writes what the worker can put (so these run without `.venv-mooncake`)."""

from __future__ import annotations

import numpy as np
import pytest

from replay.sim.native.crosscheck import tight
from replay.sim.native.host_oracle import B, conversations
from replay.sim.native.mooncake_oracle import ENGINE, Setup, run_model
from replay.sim.native.worker import NativeError, find_engine
from tests.scripts import load_script

script = load_script("mooncake_agreement")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--seeds", "0"], "error: --seeds 0: expected at least 1"),
        (["--watermark", "0"], "error: --watermark 0.0: expected above 0 and at most 1"),
        (["--watermark", "1.5"], "error: --watermark 1.5: expected above 0 and at most 1"),
        (
            ["--python", "no/such/python"],
            "error: --python names no/such/python, which does not exist: run `bash "
            "scripts/setup_mooncake_cpu.sh`",
        ),
    ],
)
def test_bad_arguments_are_refused_naming_the_flag(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert script.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(says)
    assert "\n" not in err


def test_the_mooncake_environment_is_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mooncake is looked for in `.venv-mooncake`, never in the project's environments."""
    monkeypatch.setenv("REPLAY_MOONCAKE_PYTHON", "no/such/python")
    with pytest.raises(NativeError, match="REPLAY_MOONCAKE_PYTHON names no/such/python"):
        find_engine(ENGINE)
    monkeypatch.delenv("REPLAY_MOONCAKE_PYTHON")
    try:
        found = find_engine(ENGINE)
    except NativeError as e:  # not installed here: the message names the setup script
        assert "scripts/setup_mooncake_cpu.sh" in str(e)
        assert ".venv-mooncake" in str(e)
    else:
        assert found.how in (".venv-mooncake", "this environment")


def test_the_model_writes_each_state_once_at_a_block_end() -> None:
    """The write stream the worker replays: states at full blocks' ends (the worker refuses
    others), each written by one request only, within that request's sequence; and with room
    for everything the store holds every earlier state a prompt reaches."""
    for reqs in (conversations(np.random.default_rng(0)), tight(np.random.default_rng(1), B)):
        steps = run_model(reqs, Setup(40, 1024), 1024)
        assert any(st.states for st in steps)
        for r, st in zip(reqs, steps, strict=True):
            assert all(p % B == 0 and 0 < p <= r.n + r.out for p in st.states)
            assert st.held.usable <= st.held.store <= r.n
            assert st.held.usable % B == 0


def test_a_smaller_store_holds_no_more() -> None:
    """Rule 5's room: a 44-block store holds no more of any prompt than a 1,024-block one."""
    reqs = tight(np.random.default_rng(0), B)
    big = run_model(reqs, Setup(40, 1024), 1024)
    small = run_model(reqs, Setup(40, 44), 44)
    assert sum(s.held.store for s in small) < sum(b.held.store for b in big)
    assert all(s.held.store <= b.held.store for s, b in zip(small, big, strict=True))
