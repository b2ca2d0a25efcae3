"""Text ↔ token ids for the emulator's text endpoints, and the chat template they use.

The engine model works on token ids; a real server turns text into ids in its HTTP layer, and
so does the emulator. Two tokenizers:

- `BuiltinTokenizer` (the default): fast and deterministic, no files. Text is split into pieces
  the way GPT-style pre-tokenizers split it (`[ ]?word`, `[ ]?punctuation`, whitespace runs,
  special tokens whole) and each piece maps to one id: a *canonical word* (a space and
  three consonant-vowel syllables, see `word_of`) is the spelling of one id and maps back to it; any
  other piece maps to an id by hashing (CRC-32). The same text always gives the same ids, and
  text sharing a prefix gives ids sharing a prefix (up to the piece at the junction), so prefix
  caching follows the text. Generated ids decode to ` word` pieces that tokenize back to the
  same ids: a client that sends the answer back as the next turn's history (chat) hits the
  cache over it, as on a real server whose tokenizer round-trips its own output.
- `HFTokenizer`: a Hugging Face tokenizer (`tokenizer.json`) from a local folder or a hub name,
  through the `tokenizers` package (optional: `pip install tokenizers`). Its folder's
  `tokenizer_config.json` `chat_template` (Jinja) is used for chat when present.

The chat template without a tokenizer-supplied one is ChatML (`CHATML_TEMPLATE`):
`<|im_start|>{role}\\n{content}<|im_end|>\\n` per message, and `<|im_start|>assistant\\n` to
prompt the answer. A message's content is a string or a list of `{"type": "text", "text": ...}`
parts (other part types are refused by the caller).
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

# Canonical words (a space and three syllables, 512,000 of them) spell ids: replay.token_words,
# shared with the client, which writes token-id prompts as text for a router that takes text.
from replay.token_words import CANONICAL as _CANONICAL
from replay.token_words import id_of_word as _id_of_word
from replay.token_words import word_of

# Pieces: an optional single space then a word; an optional space then punctuation; whitespace
# not followed by a non-space (so " word" keeps its space); any other whitespace run.
_PIECES = re.compile(r" ?\w+| ?[^\w\s]+|\s+(?!\S)|\s+")
SPECIAL_TOKENS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")
_SPECIAL_SPLIT = re.compile("(" + "|".join(re.escape(s) for s in SPECIAL_TOKENS) + ")")

CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class TextTokenizer(Protocol):
    """What the HTTP layer needs from a tokenizer."""

    name: str
    vocab_size: int

    def encode(self, text: str) -> np.ndarray: ...

    def decode(self, ids: Sequence[int] | np.ndarray) -> str: ...

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str: ...


class BuiltinTokenizer:
    """The default tokenizer (see the module docstring). `vocab_size` bounds the ids: special
    tokens take the top ids, hashed pieces the ordinary range below them."""

    name = "builtin"

    def __init__(self, vocab_size: int) -> None:
        if vocab_size < 4096:
            raise ValueError(
                f"the built-in tokenizer needs a vocabulary of ≥ 4096, got {vocab_size}"
            )
        self.vocab_size = vocab_size
        self._special = {s: vocab_size - 1 - i for i, s in enumerate(SPECIAL_TOKENS)}
        self._special_ids = {v: k for k, v in self._special.items()}
        # Hashed pieces land in [lo, hi): clear of the lowest ids (byte fallbacks in real
        # vocabularies) and of the specials at the top.
        self._lo = 256
        self._hi = vocab_size - 1024
        self._cache: dict[str, int] = {}

    def _piece_id(self, piece: str) -> int:
        got = self._cache.get(piece)
        if got is not None:
            return got
        tid = _id_of_word(piece[1:]) if _CANONICAL.match(piece) else -1
        if not 0 <= tid < self.vocab_size:
            tid = self._hash(piece)
        if len(self._cache) < 1_000_000:
            self._cache[piece] = tid
        return tid

    def _hash(self, piece: str) -> int:
        return self._lo + zlib.crc32(piece.encode()) % (self._hi - self._lo)

    def encode(self, text: str) -> np.ndarray:
        ids: list[int] = []
        for part in _SPECIAL_SPLIT.split(text):
            if not part:
                continue
            special = self._special.get(part)
            if special is not None:
                ids.append(special)
                continue
            ids.extend(self._piece_id(p) for p in _PIECES.findall(part))
        return np.asarray(ids, dtype=np.int64)

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        out = []
        for t in ids:
            t = int(t)
            special = self._special_ids.get(t)
            out.append(special if special is not None else " " + word_of(t))
        return "".join(out)

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return chatml(messages)


def chatml(messages: list[dict[str, str]]) -> str:
    """`CHATML_TEMPLATE` rendered without Jinja (the same string, faster)."""
    parts = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages]
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def _from_file(tokenizer: Any, file: Path, given: str) -> Any:
    """`tokenizers.Tokenizer.from_file`, a file it cannot read (not a tokenizer.json: e.g.
    /etc/passwd, issue 36) said as a ValueError naming --tokenizer instead of its bare
    `Exception` traceback."""
    try:
        return tokenizer.from_file(str(file))
    except Exception as e:  # tokenizers raises plain Exception for a bad file
        raise ValueError(
            f"--tokenizer {given}: {file} is not a Hugging Face tokenizer.json "
            f"({str(e).strip() or type(e).__name__}); give a tokenizer.json, a folder holding "
            "one, a hub name, or leave --tokenizer out for the built-in one"
        ) from None


class HFTokenizer:
    """A Hugging Face `tokenizer.json` (local folder, file, or hub name) via `tokenizers`."""

    def __init__(self, name_or_path: str) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as e:
            raise ValueError(
                f"--tokenizer {name_or_path}: the 'tokenizers' package is not installed; "
                "run `pip install tokenizers`, or leave --tokenizer out for the built-in one"
            ) from e
        path = Path(name_or_path)
        config: dict[str, Any] = {}
        if path.is_dir():
            file = path / "tokenizer.json"
            if not file.is_file():
                raise ValueError(
                    f"--tokenizer {name_or_path}: the folder has no tokenizer.json "
                    "(save one with tokenizers' Tokenizer.save or transformers' save_pretrained)"
                )
            self._tok = _from_file(Tokenizer, file, name_or_path)
            cfg_file = path / "tokenizer_config.json"
            if cfg_file.is_file():
                try:
                    config = json.loads(cfg_file.read_text(encoding="utf-8"))
                except (OSError, json.JSONDecodeError) as e:
                    raise ValueError(f"{cfg_file}: not readable JSON: {e}") from e
        elif path.is_file():
            self._tok = _from_file(Tokenizer, path, name_or_path)
        else:
            try:
                self._tok = Tokenizer.from_pretrained(name_or_path)
            except Exception as e:
                raise ValueError(
                    f"--tokenizer {name_or_path}: not a local folder or file, and the hub "
                    f"could not give it ({type(e).__name__}: {e})"
                ) from e
        self.name = name_or_path
        self.vocab_size = self._tok.get_vocab_size(with_added_tokens=True)
        template = config.get("chat_template")
        self._template = None
        if isinstance(template, str) and template:
            import jinja2

            env = jinja2.Environment(autoescape=False, keep_trailing_newline=True)
            self._template = env.from_string(template)
            self._template_vars = {
                k: config[k] for k in ("bos_token", "eos_token") if isinstance(config.get(k), str)
            }

    def encode(self, text: str) -> np.ndarray:
        return np.asarray(self._tok.encode(text, add_special_tokens=False).ids, dtype=np.int64)

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        text: str = self._tok.decode([int(t) for t in ids], skip_special_tokens=False)
        return text

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        if self._template is None:
            return chatml(messages)
        rendered: str = self._template.render(
            messages=messages, add_generation_prompt=True, **self._template_vars
        )
        return rendered


def load_tokenizer(name_or_path: str | None, vocab_size: int) -> TextTokenizer:
    """The built-in tokenizer for None or "builtin", else a Hugging Face one. Raises ValueError
    naming `--tokenizer` when it cannot be loaded or does not fit the model's vocabulary."""
    if name_or_path in (None, "", "builtin"):
        return BuiltinTokenizer(vocab_size)
    tok = HFTokenizer(name_or_path)
    if tok.vocab_size > vocab_size:
        raise ValueError(
            f"--tokenizer {name_or_path}: its vocabulary ({tok.vocab_size} ids) is larger than "
            f"the model profile's ({vocab_size}); use a profile with a larger vocab_size"
        )
    return tok


def save_char_tokenizer(folder: Path, chars: int = 0x2500) -> Path:
    """Write a character-level Hugging Face tokenizer (`tokenizer.json` and
    `tokenizer_config.json` with a ChatML template) into `folder`: one id per code point below
    `chars`, `[UNK]` (id 0) for the rest, the ChatML specials. Any id sequence decodes to text
    that encodes back to the same ids, so a peer tool that builds prompts from token ids (aiperf,
    `vllm bench serve`, GuideLLM) and an emulator started with `--tokenizer folder` agree on
    every length: the offline stand-in for a model's tokenizer in tests and benchmarks."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    vocab = {"[UNK]": 0}
    for cp in range(chars):
        vocab.setdefault(chr(cp), len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), "isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 1 << 20,
        "unk_token": "[UNK]",
        "eos_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "chat_template": CHATML_TEMPLATE,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return folder
