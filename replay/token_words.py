"""Token ids as words, and back: the spelling the emulator's built-in tokenizer reads exactly.

The built-in tokenizer (replay.emulator.tokenizer.BuiltinTokenizer) maps a *canonical word* —
a space and three consonant-vowel syllables (` kabodu`) — to the one id it spells, and decodes
every ordinary id to that word. So a token-id prompt written as `ids_as_text(ids)` is read back
by the emulator as exactly `ids` (for ids below both `WORDS` and the model's vocabulary). The
client needs this where a router in front of the engines takes text prompts only (smg 1.13.0's
HTTP path: `prompt` must be text, issue 26); the emulator needs it to tokenize. It lives here,
below both, because the client never imports the emulator (tests/unit/test_import_graph.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

CONSONANTS = "bdfghjklmnprstvz"  # 16
VOWELS = "aeiou"  # 5
SYLLABLES = len(CONSONANTS) * len(VOWELS)  # 80 per syllable
WORDS = SYLLABLES**3  # 512,000 ids have a word of three syllables
CANONICAL = re.compile(r"^ ([bdfghjklmnprstvz][aeiou]){3}$")  # a piece that spells an id

_SYL = [c + v for c in CONSONANTS for v in VOWELS]  # syllable s is _SYL[s]


def word_of(token_id: int) -> str:
    """The canonical spelling of an id: three consonant-vowel syllables (`kabodu`), the
    lowest syllable first."""
    parts = []
    n = int(token_id)
    for _ in range(3):
        n, s = divmod(n, SYLLABLES)
        c, v = divmod(s, len(VOWELS))
        parts.append(CONSONANTS[c] + VOWELS[v])
    return "".join(parts)


def id_of_word(word: str) -> int:
    """The id a canonical word (without its space) spells: `word_of`'s inverse."""
    n = 0
    for k in range(2, -1, -1):
        c = CONSONANTS.index(word[2 * k])
        v = VOWELS.index(word[2 * k + 1])
        n = n * SYLLABLES + c * len(VOWELS) + v
    return n


def ids_as_text(ids: Sequence[int] | np.ndarray) -> str:
    """`ids` as the text of their canonical words (` kabodu pafeti …`), which the emulator's
    built-in tokenizer reads back into exactly `ids`. ValueError for an id no word spells."""
    arr = np.asarray(ids, dtype=np.int64)
    if arr.size == 0:
        return ""
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= WORDS:
        bad = lo if lo < 0 else hi
        raise ValueError(f"token id {bad} has no word (words spell ids 0..{WORDS - 1})")
    # Vectorised: the three syllables of every id, joined per id (a 200K-id prompt in ~0.1 s
    # where a call per id takes several times that).
    s0, rest = np.divmod(arr, SYLLABLES)[::-1]
    s1, s2 = np.divmod(rest, SYLLABLES)[::-1]
    syl = np.asarray(_SYL)
    words = np.char.add(np.char.add(np.char.add(" ", syl[s0]), syl[s1]), syl[s2])
    return "".join(words.tolist())


__all__ = ["CANONICAL", "SYLLABLES", "WORDS", "id_of_word", "ids_as_text", "word_of"]
