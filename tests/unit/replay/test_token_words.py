"""replay.token_words: token ids written as the canonical words the emulator's built-in
tokenizer reads back exactly (the text prompts the client sends through a router that takes
text only, issue 26), and the options that turn them on under `--router external` only."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from replay.client.fleet import FleetSpec, external_adapter_options
from replay.client.orchestrate import _behind_router
from replay.emulator import tokenizer as emulator_tokenizer
from replay.emulator.tokenizer import BuiltinTokenizer
from replay.engines.adapters import make_adapter
from replay.engines.preflight import Check, PreflightReport
from replay.token_words import WORDS, id_of_word, ids_as_text, word_of

VOCAB = 151552  # glm-5.3-flash's vocabulary (configs/models/glm-5.3-flash.yaml)


def test_text_of_ids_reads_back_as_exactly_those_ids_on_the_emulator() -> None:
    tok = BuiltinTokenizer(VOCAB)
    rng = np.random.default_rng(0)
    # The whole range: id 0, byte-fallback ids, hashed-piece ids and the top ids the
    # tokenizer keeps for its special tokens (a canonical word still spells them).
    ids = np.concatenate(
        [[0, 1, 255, VOCAB - 1, VOCAB - 2, VOCAB - 3], rng.integers(0, VOCAB, 5000)]
    )
    text = ids_as_text(ids)
    assert np.array_equal(tok.encode(text), ids)
    assert text == "".join(" " + word_of(int(i)) for i in ids)
    assert tok.decode(ids[6:]) == ids_as_text(ids[6:])  # the emulator decodes the same words
    assert ids_as_text([]) == ""


def test_the_emulator_uses_the_shared_spelling() -> None:
    assert emulator_tokenizer.word_of is word_of
    assert word_of(0) == "bababa" and word_of(1) == "bebaba" and word_of(80) == "babeba"
    assert all(id_of_word(word_of(i)) == i for i in (0, 1, 79, 80, 6399, 6400, WORDS - 1))


@pytest.mark.parametrize("bad", [-1, WORDS])
def test_an_id_no_word_spells_is_refused_by_name(bad: int) -> None:
    with pytest.raises(ValueError, match=f"token id {bad} has no word"):
        ids_as_text([5, bad])


def test_vllm_adapter_sends_text_only_when_asked() -> None:
    ids = np.array([7, 8, 9])
    plain = orjson.loads(make_adapter("vllm", "http://x", "m").build_body(ids, 2))
    assert plain["prompt"] == [7, 8, 9]
    text = orjson.loads(make_adapter("vllm", "http://x", "m", text_prompt=True).build_body(ids, 2))
    assert text["prompt"] == ids_as_text(ids) and text["return_token_ids"] is True
    assert text["max_tokens"] == 2 and text["ignore_eos"] is True


def test_text_prompts_are_chosen_by_router_external_for_adapters_that_can() -> None:
    ext = FleetSpec(("http://router",), "external")
    ours = FleetSpec(("http://a", "http://b"), "round_robin")
    assert external_adapter_options("vllm", ext, {}) == {"text_prompt": True}
    assert external_adapter_options("flashstate", ext, {}) == {"text_prompt": True}
    assert external_adapter_options("sglang", ext, {}) == {}  # /generate keeps input_ids
    assert external_adapter_options("vllm", ours, {}) == {}
    assert external_adapter_options("vllm", None, {}) == {}
    assert external_adapter_options("vllm", ext, {"text_prompt": False}) == {"text_prompt": False}


def test_behind_a_router_the_metrics_check_is_informative() -> None:
    rep = PreflightReport("http://router", "vllm", None)
    rep.checks = [
        Check("reachable", True, "ok."),
        Check("metrics readable", False, "GET /metrics answered 404.", "serve metrics"),
    ]
    assert not rep.ok
    _behind_router(rep)
    assert rep.ok
    assert "a router in front of the replicas" in rep.checks[1].detail
