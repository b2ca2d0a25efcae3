"""scripts/hicache_agreement.py refuses bad arguments with one line naming the flag, before
it starts SGLang (so these run without the SGLang environment)."""

from __future__ import annotations

import pytest

from tests.scripts import load_script

script = load_script("hicache_agreement")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--seeds", "0"], "error: --seeds 0: expected at least 1"),
        (["--sessions", "0"], "error: --sessions 0: expected at least 1"),
        (["--turns", "-2"], "error: --turns -2: expected at least 1"),
        (["--trace", "no/such.jsonl.gz"], "error: --trace no/such.jsonl.gz: no such file"),
    ],
)
def test_bad_arguments_are_refused_naming_the_flag(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert script.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(says)
    assert "\n" not in err
