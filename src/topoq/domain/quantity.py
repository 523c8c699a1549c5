"""Kubernetes resource quantities ("500m", "16Gi", "1e3") as exact integers.

Canonical units: ``cpu`` in millicores, every other resource in whole units (bytes for memory,
devices for GPUs). A fraction of a byte rounds up, as Kubernetes does; a fraction of a resource
counted in whole units (GPUs and other extended resources, ``pods``) is refused, as Kubernetes
refuses it. A quantity is at most ``MAX_QUANTITY_CHARS`` long, finite, and at most
``MAX_AMOUNT`` in canonical units; all of this is checked before any arithmetic.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

from topoq.domain.errors import InvalidInputError

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
NVIDIA_GPU = "nvidia.com/gpu"
NEURON_DEVICE = "aws.amazon.com/neurondevice"
NEURON_CORE = "aws.amazon.com/neuroncore"
EFA = "vpc.amazonaws.com/efa"

MILLI_RESOURCES = frozenset({CPU})
FRACTIONAL_RESOURCES = frozenset({CPU, MEMORY, EPHEMERAL_STORAGE, "storage"})
"""Resources a fraction of which means something (millicores, bytes rounded up); every other
one (plus ``hugepages-*``, which are bytes) is counted in whole units."""
MAX_QUANTITY_CHARS = 64
MAX_AMOUNT = 2**63 - 1
"""The largest amount in canonical units (Kubernetes keeps quantities in an int64)."""
_MAX_EXPONENT = 40
_WHOLE_HINT = "counted in whole units, as Kubernetes counts extended resources: write e.g. 1 or 8"

_BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"
)


def quantity_value(text: str | int | float) -> Decimal:
    """The exact value of a Kubernetes quantity, e.g. ``"16Gi"`` → 17179869184."""
    if isinstance(text, bool):
        raise InvalidInputError(
            f"{text!r} is not a quantity", hint="use a number such as 8 or '16Gi'"
        )
    if isinstance(text, float) and not math.isfinite(text):
        raise InvalidInputError(
            f"{text!r} is not a finite number", hint="give a quantity such as 8"
        )
    if isinstance(text, int | float):
        text = repr(text)
    if len(text) > MAX_QUANTITY_CHARS:
        raise InvalidInputError(
            f"a quantity longer than {MAX_QUANTITY_CHARS} characters ({len(text):,})",
            hint="give a quantity such as 8, 500m or 16Gi",
        )
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise InvalidInputError(
            f"{text!r} is not a Kubernetes quantity",
            hint="use a number with an optional suffix: 500m, 2, 16Gi, 16G, 1e3",
        )
    try:
        number = Decimal(match["number"])
    except InvalidOperation as error:  # pragma: no cover - the regex admits only numbers
        raise InvalidInputError(f"{text!r} is not a Kubernetes quantity") from error
    suffix = match["suffix"] or ""
    if suffix in _BINARY_SUFFIXES:
        return number * _BINARY_SUFFIXES[suffix]
    if suffix in _DECIMAL_SUFFIXES:
        return number * _DECIMAL_SUFFIXES[suffix]
    exponent = int(suffix[1:])
    if abs(exponent) > _MAX_EXPONENT:
        raise InvalidInputError(
            f"{text!r} has an exponent beyond ±{_MAX_EXPONENT}",
            hint="give a quantity such as 8, 500m, 16Gi or 1e3",
        )
    return number * (Decimal(10) ** exponent)


def parse_quantity(resource: str, text: str | int | float) -> int:
    """A quantity of ``resource`` in canonical integer units (millicores for cpu)."""
    value = quantity_value(text)
    if value < 0:
        raise InvalidInputError(f"{resource}: {text!r} is negative", hint="quantities must be >= 0")
    if resource in MILLI_RESOURCES:
        value *= 1000
    if value > MAX_AMOUNT:
        raise _too_large(text)
    if not is_fractional(resource) and value != value.to_integral_value():
        raise InvalidInputError(
            f"{resource}: {text!r} must be a whole number", hint=f"{resource} is {_WHOLE_HINT}"
        )
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def is_fractional(resource: str) -> bool:
    """Whether a fraction of ``resource`` is allowed (cpu millicores, bytes rounded up)."""
    return resource in FRACTIONAL_RESOURCES or resource.startswith("hugepages-")


def _too_large(text: object) -> InvalidInputError:
    return InvalidInputError(
        f"{text!r:.60} is more than any cluster has",
        hint=f"quantities are at most {MAX_AMOUNT:,} units (bytes, millicores, devices); "
        "check the unit (e.g. 1Ti, not 1e30)",
    )


def format_quantity(resource: str, amount: int) -> str:
    """The shortest readable Kubernetes quantity for a canonical amount."""
    if resource in MILLI_RESOURCES:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource in (MEMORY, EPHEMERAL_STORAGE) and amount:
        for suffix, factor in sorted(_BINARY_SUFFIXES.items(), key=lambda item: -item[1]):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


_BINARY_UNITS: tuple[tuple[str, int], ...] = (
    ("Ei", 2**60),
    ("Pi", 2**50),
    ("Ti", 2**40),
    ("Gi", 2**30),
    ("Mi", 2**20),
    ("Ki", 2**10),
)


def byte_quantity(amount: int) -> str:
    """Bytes as a readable Kubernetes quantity in the largest binary unit they reach:
    ``512Gi`` (exact values keep integers), ``1.5Ti`` for 1536 GiB; one unit down when the
    value is a whole number there and not two decimals in the larger (``1025Gi``); else
    rounded to two decimals (``953.67Mi``). Under 1 Ki, the bytes."""
    reached = [(suffix, factor) for suffix, factor in _BINARY_UNITS if amount >= factor]
    if not reached:
        return str(amount)
    (suffix, factor), *smaller = reached
    if amount * 100 % factor == 0:
        return _decimal_text(Decimal(amount) / factor) + suffix
    if smaller and amount % smaller[0][1] == 0:
        return f"{amount // smaller[0][1]}{smaller[0][0]}"
    return _decimal_text(round(Decimal(amount) / factor, 2)) + suffix


def _decimal_text(value: Decimal) -> str:
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return text or "0"
