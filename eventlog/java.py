"""Java behaviour LangChain4j relies on, emulated once: ``Double.toString`` and blank checks.

Both the LangChain4j JSON codec (:mod:`eventlog.lc4j_json`) and the token estimator
(:mod:`projections.tokens`) must print numbers and judge blank text exactly as the JVM does;
they share this module so the two emulations cannot drift apart. ``projections`` may import
``eventlog`` but never the reverse, which is why it lives here.

Where Java's output depends on the JVM, this matches JDK 19 and later (21, 25, ...): JDK 17's
``Double.toString`` sometimes prints a longer or different decimal (``9.999999999999999E22``
for ``1e23``).
"""

from __future__ import annotations

import math
from typing import Final

__all__ = ["TRIM_CHARS", "double_to_string", "is_blank"]

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
