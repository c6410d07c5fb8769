"""Pronounceable invented names built from a fixed syllable inventory (TinyWorld, issue 2).

Every invented word is a sequence of syllables from ``SYLLABLES``: open syllables (consonant +
vowel) everywhere and, in the last position only, closed ones (consonant + vowel + n/r/l/s).
A tokenizer trained on generic vocabulary plus ``syllable_vocabulary()`` therefore splits every
entity name the same way in demonstrations and in any world, so a model learns to copy names
rather than memorise them (see STACK.md, "Probe").

Example:
    >>> import numpy as np
    >>> words = make_words(5, np.random.default_rng(0))
    >>> len(set(words)) == 5 and all(w[0].isupper() for w in words)
    True
"""

from __future__ import annotations

import numpy as np

ONSETS = ("b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z")
VOWELS = ("a", "e", "i", "o", "u")
CODAS = ("n", "r", "l", "s")

OPEN_SYLLABLES: tuple[str, ...] = tuple(o + v for o in ONSETS for v in VOWELS)
CLOSED_SYLLABLES: tuple[str, ...] = tuple(s + c for s in OPEN_SYLLABLES for c in CODAS)
# The inventory a tokenizer is trained on (lower case; ``syllable_vocabulary`` adds capitals).
SYLLABLES: tuple[str, ...] = OPEN_SYLLABLES + CLOSED_SYLLABLES

# Suffixes that turn a country name into its nationality adjective. Words never contain two
# vowels in a row, so "ian"/"vian" forms can never equal another invented word; codas are never
# "v", so the two forms never collide either.
DEMONYM_AFTER_CONSONANT = "ian"
DEMONYM_AFTER_VOWEL = "vian"

_N_OPEN = len(OPEN_SYLLABLES)
_N_ALL = len(SYLLABLES)


def syllable_vocabulary() -> list[str]:
    """Every syllable in lower case and capitalised (name-initial) form, plus demonym suffixes.

    Example:
        >>> "ka" in syllable_vocabulary() and "Ka" in syllable_vocabulary()
        True
    """
    return list(SYLLABLES) + [s.capitalize() for s in SYLLABLES] + [
        DEMONYM_AFTER_CONSONANT, DEMONYM_AFTER_VOWEL]


def _decode(codes: np.ndarray) -> list[str]:
    """Word codes -> strings. Codes < n2 have two syllables, the rest three."""
    n2 = _N_OPEN * _N_ALL
    lower = np.array(SYLLABLES, dtype=object)
    upper = np.array([s.capitalize() for s in SYLLABLES], dtype=object)
    two = codes < n2
    out = np.empty(len(codes), dtype=object)
    c2 = codes[two]
    out[two] = upper[c2 // _N_ALL] + lower[c2 % _N_ALL]
    c3 = codes[~two] - n2
    first, rest = c3 // (_N_OPEN * _N_ALL), c3 % (_N_OPEN * _N_ALL)
    out[~two] = upper[first] + lower[rest // _N_ALL] + lower[rest % _N_ALL]
    return out.tolist()


def make_words(n: int, rng: np.random.Generator, p_two: float = 0.3) -> list[str]:
    """``n`` distinct capitalised words of two or three syllables (a share ``p_two`` of two).

    Deterministic given ``rng``; vectorised (a million words in well under a second).

    Example:
        >>> make_words(3, np.random.default_rng(1)) == make_words(3, np.random.default_rng(1))
        True
    """
    n2 = _N_OPEN * _N_ALL
    capacity = n2 + _N_OPEN * _N_OPEN * _N_ALL
    if not 0 <= n <= capacity // 2:
        raise ValueError(f"make_words: n={n} is outside 0..{capacity // 2} (syllable inventory capacity)")
    chosen = np.empty(0, dtype=np.int64)
    while len(chosen) < n:
        m = int((n - len(chosen)) * 1.3) + 64
        two = rng.random(m) < p_two
        codes = np.where(two, rng.integers(0, n2, m), n2 + rng.integers(0, capacity - n2, m))
        merged = np.concatenate([chosen, codes])
        _, first = np.unique(merged, return_index=True)
        chosen = merged[np.sort(first)]  # keep first occurrences, in draw order
    return _decode(chosen[:n])


def short_names(n: int, rng: np.random.Generator) -> list[str]:
    """Up to ``n`` distinct very short names (2-3 letters, one syllable: "Zu", "Kel").

    One-syllable words are never produced by ``make_words``, so these never collide with them.

    Example:
        >>> all(len(s) <= 3 for s in short_names(10, np.random.default_rng(0)))
        True
    """
    pool = np.array([s.capitalize() for s in SYLLABLES], dtype=object)
    take = rng.permutation(len(pool))[: min(n, len(pool))]
    return pool[take].tolist()


def demonym(country: str) -> str:
    """The nationality adjective of an invented country name ("Velor" -> "Velorian").

    Example:
        >>> demonym("Velor"), demonym("Dasu")
        ('Velorian', 'Dasuvian')
    """
    suffix = DEMONYM_AFTER_VOWEL if country[-1] in VOWELS else DEMONYM_AFTER_CONSONANT
    return country + suffix
