"""The emulator's tokenizers: the built-in one's determinism, prefix identity and round trip of
generated ids; a Hugging Face tokenizer from a local folder; clear errors for bad ones."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from replay.emulator.tokenizer import (
    CHATML_TEMPLATE,
    BuiltinTokenizer,
    chatml,
    load_tokenizer,
    word_of,
)

VOCAB = 151_552


def test_same_text_same_ids_and_prefix_identity_follows_the_text() -> None:
    a, b = BuiltinTokenizer(VOCAB), BuiltinTokenizer(VOCAB)
    text = "def f(x):\n    return x + 1  # add one\n\nprint(f(2))"
    ids = a.encode(text)
    assert ids.dtype == np.int64 and len(ids) > 10
    assert np.array_equal(ids, b.encode(text))  # a fresh tokenizer (another process) agrees
    longer = a.encode(text + "\nprint(f(3)) and more words")
    assert np.array_equal(longer[: len(ids) - 1], ids[:-1])
    assert not np.array_equal(a.encode("other text entirely"), ids[:3])
    assert ids.min() >= 0 and ids.max() < VOCAB


def test_generated_ids_decode_to_text_that_tokenizes_back_to_them() -> None:
    tok = BuiltinTokenizer(VOCAB)
    out = np.random.default_rng(0).integers(1000, VOCAB - 1024, 500)
    text = tok.decode(out)
    assert text.startswith(" ") and len(text.split()) == 500
    assert np.array_equal(tok.encode(text), out)
    assert word_of(0) == "bababa"


def test_a_chat_answer_sent_back_keeps_the_whole_previous_turn_as_prefix() -> None:
    tok = BuiltinTokenizer(VOCAB)
    turn1 = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi!"}]
    p1 = tok.encode(tok.apply_chat_template(turn1))
    out = np.arange(5000, 5040)
    turn2 = [*turn1, {"role": "assistant", "content": tok.decode(out)}]
    turn2.append({"role": "user", "content": "More, please."})
    p2 = tok.encode(tok.apply_chat_template(turn2))
    assert np.array_equal(p2[: len(p1)], p1)
    assert np.array_equal(p2[len(p1) : len(p1) + len(out)], out)


def test_special_tokens_are_single_ids_at_the_top_of_the_vocabulary() -> None:
    tok = BuiltinTokenizer(VOCAB)
    ids = tok.encode("<|im_start|>user\nhello<|im_end|>\n")
    assert ids[0] == VOCAB - 1 and VOCAB - 2 in ids.tolist()
    assert tok.decode([VOCAB - 1]) == "<|im_start|>"


def test_chatml_renders_like_its_jinja_template() -> None:
    jinja2 = pytest.importorskip("jinja2")
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    rendered = jinja2.Template(CHATML_TEMPLATE, keep_trailing_newline=True).render(
        messages=msgs, add_generation_prompt=True
    )
    assert rendered == chatml(msgs)


def _word_level_dir(tmp_path: Path, words: list[str], template: str | None) -> Path:
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {w: i for i, w in enumerate(["[UNK]", *words])}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.decoder = tokenizers.decoders.WordPiece()
    tmp_path.mkdir(parents=True, exist_ok=True)
    tok.save(str(tmp_path / "tokenizer.json"))
    config: dict[str, object] = {"tokenizer_class": "PreTrainedTokenizerFast"}
    if template:
        config["chat_template"] = template
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    return tmp_path


def test_a_hugging_face_tokenizer_folder_and_its_chat_template(tmp_path: Path) -> None:
    words = ["hello", "world", "user", "assistant", ":", "the", "cat"]
    template = "{% for m in messages %}{{ m.role }} : {{ m.content }} {% endfor %}assistant :"
    tok = load_tokenizer(str(_word_level_dir(tmp_path, words, template)), VOCAB)
    assert tok.vocab_size == len(words) + 1
    ids = tok.encode("hello the cat")
    assert ids.tolist() == [1, 6, 7]
    assert tok.decode(ids) == "hello the cat"
    prompt = tok.apply_chat_template([{"role": "user", "content": "hello world"}])
    assert prompt == "user : hello world assistant :"


def test_bad_tokenizers_fail_naming_the_flag(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    with pytest.raises(ValueError, match=r"--tokenizer .*no tokenizer\.json"):
        load_tokenizer(str(tmp_path), VOCAB)
    big = _word_level_dir(tmp_path / "big", [f"w{i}" for i in range(5000)], None)
    with pytest.raises(ValueError, match=r"--tokenizer .*vocabulary \(5001 ids\) is larger"):
        load_tokenizer(str(big), 4096)
    assert load_tokenizer(None, VOCAB).name == "builtin"


def test_a_file_that_is_no_tokenizer_fails_naming_the_flag(tmp_path: Path) -> None:
    """Issue 36: `replay serve-sim --tokenizer /etc/passwd` was a bare `Exception` traceback
    from `tokenizers`; a folder whose tokenizer.json is junk likewise."""
    import subprocess
    import sys

    pytest.importorskip("tokenizers")
    junk = tmp_path / "passwd"
    junk.write_text("root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(ValueError, match=r"--tokenizer .*passwd is not a Hugging Face tokeni"):
        load_tokenizer(str(junk), VOCAB)
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text("{}")
    with pytest.raises(ValueError, match=r"--tokenizer .*tokenizer\.json is not a Hugging"):
        load_tokenizer(str(tmp_path / "tok"), VOCAB)
    res = subprocess.run(
        [sys.executable, "-m", "replay", "serve-sim", "--engine", "vllm", "--port", "0",
         "--tokenizer", str(junk)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert f"--tokenizer {junk}: {junk} is not a Hugging Face tokenizer.json" in res.stderr
    assert "Traceback" not in res.stderr
