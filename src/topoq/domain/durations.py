"""Durations as users write them: whole seconds (``90``), a number with a unit (``90s``,
``30m``, ``2h``, ``1d``, or a sum of them as Go writes it: ``1h30m``), or Slurm's clock forms
(``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``). One parser for time limits
and the starvation guard, so a file, an option and the API read them alike."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from topoq.domain.errors import InvalidInputError

MAX_DURATION_S = 366 * 24 * 3600
"""The longest duration accepted (a year): a longer time limit is a typo, not a plan."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_GO_FORM = re.compile(r"(?:(\d+(?:\.\d+)?)([smhd]))+")
_GO_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_SLURM_FORM = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")
FORMS = "seconds (90), 90s, 30m, 2h, 1d, 1h30m, or Slurm's HH:MM:SS and D-HH:MM:SS"


def duration_s(value: object, *, where: str, allow_zero: bool = False) -> float:
    """The duration ``value`` says, in seconds; ``InvalidInputError`` naming ``where``."""
    seconds = _parsed(value)
    if seconds is None:
        raise InvalidInputError(
            f"expected a duration, got {value!r:.40}", where=where, hint=f"write {FORMS}"
        )
    least = "0" if allow_zero else "more than 0"
    if seconds < 0 or (seconds == 0 and not allow_zero) or seconds > MAX_DURATION_S:
        raise InvalidInputError(
            f"duration {value!r:.40} is out of range",
            where=where,
            hint=f"give {least} and at most {MAX_DURATION_S // 86400} days",
        )
    return seconds


def _parsed(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return None if math.isnan(value) else float(value)
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    if text.isascii() and text.isdecimal():
        return float(text)
    if _GO_FORM.fullmatch(text):
        return sum(float(number) * _UNITS[unit] for number, unit in _GO_PART.findall(text))
    return _slurm(text)


def _slurm(text: str) -> float | None:
    """Slurm's forms: ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``."""
    match = _SLURM_FORM.fullmatch(text)
    if match is None or (":" not in text and "-" not in text):
        return None
    days, first, second, third = match.groups()
    numbers = [int(part) for part in (first, second, third) if part is not None]
    if days is None:  # MM:SS or HH:MM:SS
        weights = [60, 1] if len(numbers) == 2 else [3600, 60, 1]
    else:  # D-HH, D-HH:MM, D-HH:MM:SS
        weights = [3600, 60, 1][: len(numbers)]
    return float(int(days or 0) * 86400 + sum(n * w for n, w in zip(numbers, weights, strict=True)))


def format_duration(seconds: float) -> str:
    """``2h``, ``1h30m``, ``45s``: the shortest exact Go-like form (whole seconds)."""
    left = round(seconds)
    if left <= 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts)


def iso_time_s(text: str) -> float:
    """Seconds since the epoch of an ISO date (midnight) or time, UTC when it names no zone;
    ValueError when ``text`` is neither."""
    moment = datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


LATEST_MOMENT_S = 253_402_300_799.0
"""9999-12-31T23:59:59Z, the last second a date can name: a later moment is a typo."""
MOMENT_HINT = (
    "give an ISO date (2024-05-01, midnight UTC), an ISO time (2024-05-01T12:00:00Z; UTC "
    "when it names no zone) or seconds since the epoch"
)


class NotAMoment(ValueError):
    """What :func:`moment_s` refuses, with a hint; each caller says it in its own error."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def moment_s(text: str) -> float:
    """Seconds since the epoch of a number of epoch seconds, an ISO date (midnight UTC) or an
    ISO time (UTC when it names no zone), from 1970 to 9999; :class:`NotAMoment` else."""
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = iso_time_s(text)
        except ValueError:
            raise NotAMoment(f"not a time: {text!r:.60}", MOMENT_HINT) from None
    if not (math.isfinite(seconds) and 0 <= seconds <= LATEST_MOMENT_S):
        raise NotAMoment(f"{text!r:.60} is out of range", "give a time from 1970 to 9999")
    return seconds


def moment_since(value: str, now: float, *, where: str) -> float:
    """The moment ``value`` names, in seconds since the epoch: a duration back from ``now``
    (``30m``, ``2h``, ``1d``: any form :func:`duration_s` reads) or an ISO time
    (``2026-12-01T09:00:00Z``; without a zone it is UTC). It may not lie after ``now``."""
    text = value.strip()
    if _parsed(text) is not None:
        return now - duration_s(text, where=where)
    try:
        seconds = iso_time_s(text)
    except ValueError:
        raise InvalidInputError(
            f"expected a duration or an ISO time, got {value!r:.40}",
            where=where,
            hint=f"write a duration back from now ({FORMS}) or a time like 2026-12-01T09:00:00Z",
        ) from None
    if seconds > now:
        raise InvalidInputError(
            f"{value!r:.40} is in the future", where=where, hint="give a time before now"
        )
    return seconds
