"""Java behaviour LangChain4j relies on, emulated once: ``Double.toString``, blank checks and
``HashMap`` iteration order.

Both the LangChain4j JSON codec (:mod:`eventlog.formats.lc4j_json`) and the token estimator
(:mod:`projections.tokens`) must print numbers and judge blank text exactly as the JVM does;
they share this module so the two emulations cannot drift apart. ``projections`` may import
``eventlog`` but never the reverse, which is why it lives here.

Where Java's output depends on the JVM, this matches JDK 19 and later (21, 25, ...): JDK 17's
``Double.toString`` sometimes prints a longer or different decimal (``9.999999999999999E22``
for ``1e23``), and JDK 17 orders a ``HashMap`` copy of 3, 6, 12, ... keys differently (kept
behind ``jdk17=`` so the tests can pin each JDK down).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Final

__all__ = ["TRIM_CHARS", "double_to_string", "is_blank", "java_hashmap_order"]

TRIM_CHARS: Final = "".join(map(chr, range(0x21)))
"""What Java's ``String.trim()`` strips: every char <= U+0020, not Unicode whitespace.

U+00A0 and U+2003 are *not* blank in Java. Jackson's base64 reader skips the same set.
"""


def is_blank(text: str) -> bool:
    """LangChain4j's blank test, ``text.trim().isEmpty()`` (its ``ensureNotBlank``).

    Args:
        text: The text to test.

    Returns:
        True if ``text`` is empty or made only of chars <= U+0020.
    """
    # Fast path: almost every real text starts with a visible character.
    return not text or (text[0] <= " " and not text.strip(TRIM_CHARS))


# Doubles below this are subnormal; only they can have a 2-digit Java form that beats the
# 1-digit shortest form (Double.MIN_VALUE prints as 4.9E-324, Python says 5e-324).
_MIN_NORMAL: Final = 2.2250738585072014e-308


def double_to_string(value: float) -> str:
    """``Double.toString(value)`` as specified since JDK 19 (shortest uniquely-rounding decimal).

    Python's ``repr`` picks the same digits; only the layout differs: plain notation for
    ``1e-3 <= |v| < 1e7``, otherwise ``d.dddE[-]n``, always with a digit after the point.

    Args:
        value: Any float, including infinities, NaN and negative zero.

    Returns:
        Java's text, e.g. ``"2.5"``, ``"1.0E20"``, ``"1.0E-5"``, ``"4.9E-324"``, ``"Infinity"``.
    """
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if not math.isfinite(value):
        if math.isnan(value):
            return "NaN"
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if value < 0 else ""
    magnitude = -value if value < 0 else value
    digits, exponent = _shortest_digits(magnitude)
    if 1e-3 <= magnitude < 1e7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            fraction = digits[exponent + 1 :] or "0"
        else:
            whole = "0"
            fraction = "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{fraction}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def _shortest_digits(magnitude: float) -> tuple[str, int]:
    """Significant digits (no leading/trailing zeros) and decimal exponent of ``magnitude``."""
    mantissa, _, exp = float.__repr__(magnitude).partition("e")
    whole, _, fraction = mantissa.partition(".")
    all_digits = whole + fraction
    point = len(whole) + (int(exp) if exp else 0)
    stripped = all_digits.lstrip("0")
    leading_zeros = len(all_digits) - len(stripped)
    digits = stripped.rstrip("0")
    exponent = point - leading_zeros - 1
    if len(digits) == 1 and magnitude < _MIN_NORMAL:
        return _two_digit_subnormal(magnitude, digits, exponent)
    return digits, exponent


def _two_digit_subnormal(magnitude: float, digits: str, exponent: int) -> tuple[str, int]:
    # JDK 19+: when the shortest form has one digit, the closest 2-digit decimal that still
    # rounds to the value wins. The candidates bracket the exact value at 2 significant digits.
    # decimal is imported here: subnormals are rare, and the import is not free.
    from decimal import Decimal, localcontext

    with localcontext() as context:
        context.prec = 1200  # a double's exact decimal expansion has at most 767 digits
        exact = Decimal(magnitude)
        scale = exact.adjusted() - 1
        low = int(exact.scaleb(-scale))
        best: tuple[Decimal, int, int] | None = None
        for candidate in (low, low + 1):
            decimal = Decimal(candidate).scaleb(scale)
            if float(decimal) != magnitude:
                continue
            # Ties go to the even last digit, as Java specifies.
            rank = (abs(decimal - exact), candidate % 2, candidate)
            if best is None or rank[:2] < best[:2]:
                best = rank
    if best is None:  # pragma: no cover - the 1-digit form always brackets the value
        return digits, exponent
    text = str(best[2])
    return text.rstrip("0"), scale + len(text) - 1


# --------------------------------------------------------------------------------------------
# HashMap iteration order (LangChain4j copies UserMessage.attributes into a java.util.HashMap)
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _java_spread_hash(key: str) -> int:
    """``HashMap.hash(key)``: ``String.hashCode`` over UTF-16 code units, spread by ``h >>> 16``."""
    h = 0
    for char in key:
        code = ord(char)
        if code > 0xFFFF:
            # A supplementary character is two UTF-16 code units in Java.
            code -= 0x10000
            h = (31 * h + (0xD800 | (code >> 10))) & 0xFFFFFFFF
            code = 0xDC00 | (code & 0x3FF)
        h = (31 * h + code) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _table_size_for(n: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two >= n (at least 1)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _java_hashmap_capacity(size: int, *, jdk17: bool = False) -> int:
    """Table length of ``new HashMap<>(map)`` for a map of ``size`` entries.

    JDK 19+ (JDK-8281631) sizes the copy with ``ceil(size / 0.75)``; JDK 8-18 used
    ``(int) (size / 0.75f + 1.0f)``, which is one bucket table larger when ``size / 0.75`` is a
    power of two (3, 6, 12, ... entries). Both are kept so the tests can pin each JDK down.
    """
    if jdk17:
        # The float32 arithmetic is exact for any realistic size (< 2**22 entries).
        return _table_size_for(int(size / 0.75 + 1.0))
    return _table_size_for(math.ceil(size / 0.75))


def java_hashmap_order(keys: list[str], *, jdk17: bool = False) -> list[str]:
    """The iteration order of ``new HashMap<>(linkedHashMapWith(keys))``.

    A copy constructor inserts the keys in order into a pre-sized table; iteration walks the
    buckets (``hash & (length - 1)``) in index order, and each bucket's list in insertion order.
    A bucket that reaches 9 entries while the table is shorter than 64 doubles the table
    (``treeifyBin``); that is emulated. A bucket of 9+ entries in a table of 64+ becomes a
    red-black tree, whose iteration starts at the tree's root; that is *not* emulated (it needs
    nine keys sharing a bucket, i.e. crafted Java hash collisions), and such a bucket keeps
    insertion order here.
    """
    if len(keys) < 2:
        return keys
    hashes = [_java_spread_hash(key) for key in keys]
    length = _java_hashmap_capacity(len(keys), jdk17=jdk17)
    if len(keys) > 8:
        length = _grow_for_crowded_buckets(hashes, length)
    mask = length - 1
    order = sorted(range(len(keys)), key=lambda i: (hashes[i] & mask, i))
    return [keys[i] for i in order]


def _grow_for_crowded_buckets(hashes: list[int], length: int) -> int:
    """Replay the insertions and double ``length`` wherever ``treeifyBin`` would resize."""
    counts: dict[int, int] = {}
    for inserted, spread in enumerate(hashes):
        bucket = spread & (length - 1)
        counts[bucket] = counts.get(bucket, 0) + 1
        if counts[bucket] >= 9 and length < 64:
            length *= 2
            counts = {}
            for earlier in hashes[: inserted + 1]:
                index = earlier & (length - 1)
                counts[index] = counts.get(index, 0) + 1
    return length
