"""The grammar of what users type: policies, times, durations, seqs.

Shared by the CLI (as argparse types) and the inspector (its forms), so both accept and
refuse the same text with the same words. Light on purpose: the CLI builds its parser from
it, and ``chatledger --help`` must not import the window engine (the message models).

Each parser raises :class:`argparse.ArgumentTypeError` (a ``ValueError``) whose message says
how to write the value.
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

__all__ = [
    "PolicySpec",
    "parse_duration",
    "parse_policy",
    "parse_positive",
    "parse_seq",
    "parse_when",
    "policy_spec",
]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """Parse ``30m``, ``12h``, ``1d``, ``90d``, ``2w`` or a sum like ``1d12h``.

    Raises:
        argparse.ArgumentTypeError: The text is not a duration.
    """
    compact = text.replace(" ", "").lower()
    if not compact or _DURATION.sub("", compact):
        msg = f"{text!r} is not a duration; write e.g. 30m, 12h, 1d, 90d or 1d12h"
        raise argparse.ArgumentTypeError(msg)
    parts: dict[str, float] = {}
    for number, unit in _DURATION.findall(compact):
        parts[_UNITS[unit]] = parts.get(_UNITS[unit], 0.0) + float(number)
    try:
        return timedelta(**parts)
    except OverflowError:
        msg = f"{text[:40]!r} is longer than any duration; write at most 999999999d"
        raise argparse.ArgumentTypeError(msg) from None


def parse_when(text: str) -> datetime:
    """Parse an ISO 8601 time; a time without an offset is taken as UTC, and one without a
    fraction of a second names the whole second (its last microsecond): `history` prints
    times to the second, and the view at a time copied from it must include that event.

    Raises:
        argparse.ArgumentTypeError: The text is not an ISO 8601 time.
    """
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        msg = f"{text!r} is not an ISO 8601 time; write e.g. 2025-06-01T12:00:00Z (no offset = UTC)"
        raise argparse.ArgumentTypeError(msg) from None
    if moment.microsecond == 0 and not any(mark in text for mark in ".,"):
        moment = moment.replace(microsecond=999_999)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def parse_seq(text: str) -> int:
    """A seq: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        msg = f"{text!r} is not a seq; write a whole number >= 0"
        raise argparse.ArgumentTypeError(msg)
    return value


def parse_positive(text: str) -> int:
    """A whole number >= 1."""
    value = parse_seq(text)
    if value == 0:
        msg = "must be at least 1"
        raise argparse.ArgumentTypeError(msg)
    return value


class PolicySpec(NamedTuple):
    """A parsed ``--policy``: ``messages:N`` or ``tokens:N:MODEL``, then any of
    ``:evict_to=F`` (chunked eviction) and ``:valid_for=PROVIDER`` (a provider-valid view)."""

    kind: str
    limit: int
    model: str | None = None
    evict_to: float | None = None
    valid_for: str | None = None

    @property
    def text(self) -> str:
        """The option as written (canonical order), to repeat it in a hint."""
        parts = [self.kind, str(self.limit)] + ([self.model] if self.model else [])
        if self.evict_to is not None:
            parts.append(f"evict_to={self.evict_to:g}")
        if self.valid_for is not None:
            parts.append(f"valid_for={self.valid_for}")
        return ":".join(parts)


def policy_spec(text: str) -> PolicySpec:
    """A ``--policy`` text as :class:`PolicySpec` (an argparse type)."""
    # Here, not at the top: the window modules import the message models (pydantic), which
    # `chatledger --help` and the commands without --policy do not need.
    from projections.validity import PROVIDERS

    parts = text.split(":")
    options = {}
    while len(parts) > 2 and "=" in parts[-1]:
        name, _, value = parts.pop().partition("=")
        options[name] = value
    try:
        evict_to = _evict_to(options.pop("evict_to")) if "evict_to" in options else None
        valid_for = options.pop("valid_for", None)
        if valid_for is not None and valid_for not in PROVIDERS:
            msg = f"{text!r}: valid_for must be one of {', '.join(sorted(PROVIDERS))}"
            raise argparse.ArgumentTypeError(msg)
        if not options:
            if parts[0] == "messages" and len(parts) == 2:
                return PolicySpec("messages", parse_positive(parts[1]), None, evict_to, valid_for)
            if parts[0] == "tokens" and len(parts) == 3 and parts[2]:
                return PolicySpec("tokens", parse_positive(parts[1]), parts[2], evict_to, valid_for)
    except argparse.ArgumentTypeError as e:
        if "valid_for" in str(e) or "evict_to" in str(e):
            raise
    msg = (
        f"{text!r} is not a policy; write messages:N or tokens:N:MODEL (e.g. tokens:2000:gpt-4o), "
        "optionally followed by :evict_to=0.7 and :valid_for=openai|anthropic|gemini"
    )
    raise argparse.ArgumentTypeError(msg)


def parse_policy(text: str) -> PolicySpec:
    """A ``--policy`` text as :class:`PolicySpec`.

    Raises:
        ValueError: It is not a policy; the message says how to write one.
    """
    try:
        return policy_spec(text)
    except argparse.ArgumentTypeError as e:
        raise ValueError(str(e)) from None


def _evict_to(text: str) -> float:
    from projections.window import evict_permille  # here: see policy_spec

    try:
        value = float(text)
        evict_permille(value)
    except ValueError:
        msg = f"evict_to={text!r}: write a fraction between 0 and 1, e.g. evict_to=0.7"
        raise argparse.ArgumentTypeError(msg) from None
    return value
