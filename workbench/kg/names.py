"""Pronounceable invented names built from a fixed syllable inventory (TinyWorld, issue 2).

Every invented word is a sequence of syllables from ``SYLLABLES``: open syllables (consonant +
vowel) everywhere and, in the last position only, closed ones (consonant + vowel + n/r/l/s).
A tokenizer trained on generic vocabulary plus ``syllable_vocabulary()`` therefore splits every
entity name the same way in demonstrations and in any world, so a model learns to copy names
rather than memorise them (see STACK.md, "Probe"). Distinct codes give distinct words: every
syllable starts with a consonant and holds one vowel, so a word splits into syllables one way.

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


# Word codes: block k (k = 2, 3, 4 syllables) holds 75**(k-1) * 375 codes, blocks back to back.
_BLOCK = {k: _N_OPEN ** (k - 1) * _N_ALL for k in (2, 3, 4)}
_BLOCK_START = {2: 0, 3: _BLOCK[2], 4: _BLOCK[2] + _BLOCK[3]}
CAPACITY = sum(_BLOCK.values())


def _decode(codes: np.ndarray) -> list[str]:
    """Word codes -> strings: open syllables, then one open or closed last syllable."""
    lower = np.array(SYLLABLES, dtype=object)
    upper = np.array([s.capitalize() for s in SYLLABLES], dtype=object)
    out = np.empty(len(codes), dtype=object)
    for k, start in _BLOCK_START.items():
        mask = (codes >= start) & (codes < start + _BLOCK[k])
        if not mask.any():
            continue
        c = codes[mask] - start
        word = lower[c % _N_ALL]
        c = c // _N_ALL
        for i in range(k - 1):  # open syllables, right to left; the first one capitalised
            word = (upper if i == k - 2 else lower)[c % _N_OPEN] + word
            c = c // _N_OPEN
        out[mask] = word
    return out.tolist()


def make_words(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` distinct capitalised words of two to four syllables, in a seeded order.

    Mostly two or three syllables; four-syllable words join in only when ``n`` is large (beyond
    about half a million), so small worlds keep short names. Vectorised: a million words take
    about a second.

    Example:
        >>> make_words(3, np.random.default_rng(1)) == make_words(3, np.random.default_rng(1))
        True
    """
    if not 0 <= n <= CAPACITY // 4:
        raise ValueError(f"make_words: n={n} is outside 0..{CAPACITY // 4} (syllable inventory capacity)")
    weights = np.array([0.3, 0.7, 0.0]) if n <= _BLOCK[3] // 4 else np.array([0.05, 0.45, 0.5])
    chosen = np.empty(0, dtype=np.int64)
    while len(chosen) < n:
        m = int((n - len(chosen)) * 1.3) + 64
        k = rng.choice([2, 3, 4], m, p=weights)
        size = np.array([_BLOCK[2], _BLOCK[3], _BLOCK[4]])[k - 2]
        codes = np.array([_BLOCK_START[2], _BLOCK_START[3], _BLOCK_START[4]])[k - 2] + \
            (rng.random(m) * size).astype(np.int64)
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
